"""``raytrace-kit profile``: a run's samples, merged across processes and nodes, to a file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import EXIT_EMPTY, session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]

FORMATS = ("speedscope", "collapsed", "pprof")


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``profile`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "profile",
        parents=[common],
        help="the sampling profiler's samples as speedscope, folded stacks or pprof",
        description="Merge the samples of a run sampled with `raytrace-kit run --sample` (or "
        "sample=) across its processes and nodes, and write them in a format a profile "
        "viewer opens: speedscope's JSON (speedscope.app), folded stacks (flamegraph.pl, "
        "inferno), or pprof (go tool pprof, Pyroscope). Running samples only, unless --idle.",
    )
    parser.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    parser.add_argument("--function", help="only calls of this function (or a dotted suffix)")
    parser.add_argument("--call", metavar="ID", help="only this call (its id, or a prefix)")
    parser.add_argument("--node", metavar="N", help="only this node (its id, or a prefix)")
    parser.add_argument(
        "--idle", action="store_true", help="keep waiting samples too (ray.get, locks, sleep)"
    )
    parser.add_argument("--format", choices=FORMATS, default="speedscope", help="the format")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the file to write")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Write the samples asked for; 3 when there are none."""
    read = session(arguments)
    from raytrace_kit._reports import profile_formats  # noqa: PLC0415 -- not for --help
    from raytrace_kit._reports.samples import hottest_line, read_samples, select  # noqa: PLC0415

    files = read.sample_files()
    rows = select(
        read_samples(files),
        function=arguments.function,
        call=arguments.call,
        node=arguments.node,
        idle=arguments.idle,
    )
    if not rows:
        said = "no samples" if not files else "no samples match"
        print(
            f"raytrace-kit profile: {said} in {read.root} (sample with "
            "`raytrace-kit run --sample` or @debuggable(sample=True); --idle keeps waiting ones)",
            file=sys.stderr,
        )
        return EXIT_EMPTY
    out: Path = arguments.output
    if arguments.format == "speedscope":
        out.write_text(json.dumps(profile_formats.speedscope(rows, name=str(read.root))))
    elif arguments.format == "collapsed":
        out.write_text(profile_formats.collapsed(rows))
    else:
        out.write_bytes(profile_formats.pprof(rows))
    count = sum(row.count for row in rows)
    processes = len({row.process for row in rows})
    line = f"{count} samples from {processes} process(es) written to {out}"
    hottest = hottest_line(rows)
    if hottest is not None:
        frame, hot, total = hottest
        line += f"; hottest line {Path(frame.file).name}:{frame.line} ({hot / total:.0%})"
    print(line)
    return 0
