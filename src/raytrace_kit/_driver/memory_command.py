"""``raytrace-kit memory``: the object store's use, and the lines whose refs hold it, now.

Importing this module imports no Ray (the ``raytrace-kit`` command builds its parser from
it); the command attaches as ``stuck`` does (``cli._on_cluster``) and detaches.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

__all__ = ["add_command", "command", "run"]

OnCluster = Callable[[argparse.Namespace, Callable[[], Any]], Any]


def add_command(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``memory`` to ``raytrace-kit``."""
    memory = add(
        "memory",
        help="the object store's use, and the lines whose refs hold it, now",
        description="Attach to a running cluster and say what the refs of the processes the "
        "kit records hold in the object store: by the line that called .remote() or ray.put, "
        "its function, objects, bytes, bytes spilled, and what keeps them alive.",
    )
    memory.add_argument(
        "--address",
        default="auto",
        help="the cluster, HOST:PORT (default: auto, the one running here; with several "
        "running, it lists them and stops)",
    )
    memory.add_argument("--json", action="store_true", help="print it as JSON")
    memory.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for every node"
    )


def run(arguments: argparse.Namespace, on_cluster: OnCluster) -> int:
    """Run ``raytrace-kit memory``: print the view (or its JSON); an exit code."""

    def work() -> Any:
        from raytrace_kit._driver.memory import memory  # noqa: PLC0415 -- Ray on use only

        return memory(timeout=arguments.timeout)

    found = on_cluster(arguments, work)
    if isinstance(found, int):
        return found
    print(json.dumps(found.to_dict(), indent=1) if arguments.json else found)
    return 0


def command(on_cluster: OnCluster) -> Callable[[argparse.Namespace], int]:
    """``raytrace-kit memory``, attached to its cluster by ``on_cluster``."""
    return lambda arguments: run(arguments, on_cluster)
