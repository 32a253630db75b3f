"""``raytrace-kit collect``: every node's files of a running cluster copied to here."""

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
    """Add ``collect`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "collect", parents=[common], help="copy every node's files to here"
    )
    parser.add_argument(
        "--address",
        default="auto",
        help="the cluster, HOST:PORT (default: auto, the one running here; with several "
        "running, collect lists them and stops)",
    )
    parser.add_argument("-o", "--output", type=Path, help="destination directory")
    parser.add_argument("--no-profiles", action="store_true", help="leave profile captures")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Collect, then print each node's outcome and the destination."""
    from raytrace_kit._driver.collect import collect  # noqa: PLC0415 -- Ray: not for --help

    dest = on_cluster(
        arguments, lambda: collect(arguments.output, profiles=not arguments.no_profiles)
    )
    nodes = json.loads((dest / "collect.json").read_text())["nodes"]
    for record in nodes.values():
        copied = record.get("bytes_copied")
        detail = f"{copied:,} bytes copied" if copied is not None else record.get("error", "")
        print(f"node {record['node_id'][:12]}: {record['status']} {detail}".rstrip())
    print(dest)
    return 0
