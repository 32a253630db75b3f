"""``raytrace-kit stuck``: what every call in flight on a running cluster waits on, now."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import on_cluster

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``stuck`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "stuck",
        parents=[common],
        help="what every call in flight waits on, now; deadlocks named",
        description="Attach to a running cluster (through Ray: no dashboard, SSH or ptrace) "
        "and say, for every call in flight, where it is and why it is not done: what a "
        "pending call waits for, which calls a running call waits on, every deadlock; in a "
        "sampled run, where each call's samples of the last 10 s sat, and the calls that have "
        "not moved.",
    )
    parser.add_argument(
        "--address",
        default="auto",
        help="the cluster, HOST:PORT (default: auto, the one running here; with several "
        "running, it lists them and stops)",
    )
    parser.add_argument("--json", action="store_true", help="print it as JSON")
    parser.add_argument("--html", type=Path, help="also write it as an HTML file")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the nodes (30)"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the calls in flight (or their JSON), and write the HTML if asked."""
    from raytrace_kit._driver.stuck import stuck  # noqa: PLC0415 -- Ray: not for --help

    found = on_cluster(arguments, lambda: stuck(timeout=arguments.timeout))
    if arguments.html:
        found.save_html(arguments.html)
    if arguments.json:
        print(json.dumps(found.to_dict(), indent=1, default=str))
    else:
        print(found)
    return 0
