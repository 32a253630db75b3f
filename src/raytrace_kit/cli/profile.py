"""``raytrace-kit profile``: a run's samples, merged across processes and nodes, to a file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="the file to write (-: stdout)"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Write the samples asked for; 3 when there are none."""
    read = session(arguments)
    from raytrace_kit._reports.profiles import (  # noqa: PLC0415 -- not for --help
        collapsed,
        hottest_line,
        pprof,
        read_samples,
        select,
        speedscope,
    )

    files = read.sample_files()
    every = read_samples(files)
    rows = select(
        every,
        function=arguments.function,
        call=arguments.call,
        node=arguments.node,
        idle=arguments.idle,
    )
    if not rows:
        print(f"raytrace-kit profile: {_none_said(read.root, files, every, arguments)}",
              file=sys.stderr)  # fmt: skip
        return EXIT_EMPTY
    out: Path = arguments.output
    if arguments.format == "speedscope":
        data = json.dumps(speedscope(rows, name=str(read.root))).encode()
    elif arguments.format == "collapsed":
        data = collapsed(rows).encode()
    else:
        data = pprof(rows)
    to_stdout = str(out) == "-"
    if to_stdout:  # the data is stdout's; what was written is said on stderr
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        out.write_bytes(data)
    count = sum(row.count for row in rows)
    processes = len({row.process for row in rows})
    written = "stdout" if to_stdout else out
    line = f"{count} samples from {processes} process(es) written to {written}"
    hottest = hottest_line(rows)
    if hottest is not None:
        frame, hot, total = hottest
        line += f"; hottest line {Path(frame.file).name}:{frame.line} ({hot / total:.0%})"
    print(line, file=sys.stderr if to_stdout else sys.stdout)
    return 0


def _none_said(root: Path, files: list[Path], every: list[Any], arguments: Any) -> str:
    """Why no sample was chosen, and what to give instead."""
    from raytrace_kit._reports.profiles import select  # noqa: PLC0415

    sample = "sample with `raytrace-kit run --sample` or @debuggable(sample=True)"
    if not files or not every:
        return f"no samples in {root} ({sample})"
    asked = {"function": arguments.function, "call": arguments.call, "node": arguments.node}
    wanted = ", ".join(f"--{k} {v}" for k, v in asked.items() if v is not None)
    if not arguments.idle and select(every, idle=True, **asked):
        return f"the samples of {wanted or 'this run'} all wait (--idle keeps waiting ones)"
    functions = sorted({row.function for row in every if row.function is not None})
    shown = ", ".join(functions[:8]) or "none"
    more = f" and {len(functions) - 8} more" if len(functions) > 8 else ""
    return f"no samples match {wanted} in {root}; the sampled functions: {shown}{more}"
