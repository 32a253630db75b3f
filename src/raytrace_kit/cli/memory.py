"""``raytrace-kit memory``: the object store's use, and the lines whose refs hold it, now."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from raytrace_kit.cli.common import on_cluster

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``memory`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "memory",
        parents=[common],
        help="the object store's use, and the lines whose refs hold it, now",
        description="Attach to a running cluster and say what the refs of the processes the "
        "kit records hold in the object store: by the line that called .remote() or ray.put, "
        "its function, objects, bytes, bytes spilled, and what keeps them alive.",
    )
    parser.add_argument(
        "--address",
        default="auto",
        help="the cluster, HOST:PORT (default: auto, the one running here; with several "
        "running, it lists them and stops)",
    )
    parser.add_argument("--json", action="store_true", help="print it as JSON")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for every node"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the view (or its JSON)."""

    def work() -> Any:
        from raytrace_kit._driver.memory import memory  # noqa: PLC0415 -- Ray on use only

        return memory(timeout=arguments.timeout)

    found = on_cluster(arguments, work)
    print(json.dumps(found.to_dict(), indent=1) if arguments.json else found)
    return 0
