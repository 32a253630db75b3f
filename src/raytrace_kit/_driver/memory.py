"""``memory()``: what the refs of a running job hold in the object store now, by line of code.

One small task per alive node (hard node affinity, no CPU, as ``stuck()``'s) asks each
process of the node that the kit records, through its request pipe, for its held objects
(its reference table, grouped by the task that made them or the ``ray.put`` line), then
finds those tasks' lines in the node's ``call.submit`` records, where the process that
submitted them wrote them. Only those tables travel back. No dashboard, no
``RAY_record_ref_creation_sites``.
"""

from __future__ import annotations

import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray

from raytrace_kit import _process, _ray_compat, _registry
from raytrace_kit._driver.stuck import ask_each_node
from raytrace_kit._output import paths, submissions
from raytrace_kit._reports.run import HeldView, group, sites_of
from raytrace_kit._worker import held, stack_server

__all__ = ["memory"]

_ANSWER_S = 3.0  # a process that has not answered by then is named, not waited for


def _node_tables(answer_s: float) -> dict[str, Any]:
    """On the node: each recorded process's held table, and the lines of their tasks."""
    root = paths.log_dir()
    me = os.getpid()
    asked = [(pid, fifo) for pid, fifo in stack_server.fifos() if pid != me and _alive(pid)]

    def ask(item: tuple[int, Path]) -> dict[str, Any] | int:
        try:
            return stack_server.ask(item[1], {"kind": "held"}, answer_s)
        except (stack_server.NoStacksServerError, TimeoutError, OSError, ValueError):
            return item[0]

    answers: list[dict[str, Any] | int] = []
    if asked:
        with ThreadPoolExecutor(max_workers=min(16, len(asked))) as pool:
            answers = list(pool.map(ask, asked))
    tables = [a for a in answers if isinstance(a, dict)]
    wanted = {row["task_id"] for t in tables for row in t.get("rows", []) if row.get("task_id")}
    files = sorted(root.glob("events-*.jsonl"))
    return {
        "node_id": _process.process_identity().node_id,
        "root": str(root),
        "tables": tables,
        "sites": sites_of(files, wanted),
        "silent": [a for a in answers if isinstance(a, int)],
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or another user's
        return False
    return True


@_registry.cleared_on_reset
@functools.cache
def _remote() -> Any:
    remote = _ray_compat.ray_remote(num_cpus=0, max_retries=0)
    return _ray_compat.mark_kit_remote(remote(_node_tables))


def memory(*, timeout: float = 30.0) -> HeldView:
    """What the refs of the connected cluster's recorded processes hold, by line of code.

    Each group: the line that called ``.remote()`` (or ``ray.put``), its function, how
    many objects and bytes its refs keep alive, how many of those bytes were spilled to
    disk, and what keeps them (a local ref, a pending task's argument, a ref inside
    another object). Processes the kit does not record (plain Ray workers) are not asked.

    Args:
        timeout: Seconds to wait for all nodes (a node that does not answer is named).

    Returns:
        A :class:`HeldView`: ``print()`` it or ``to_dict()`` it.

    Raises:
        RuntimeError: Ray is not initialized.
    """
    if not ray.is_initialized():
        msg = "memory() reads a running Ray cluster: call ray.init(address=...) first"
        raise RuntimeError(msg)
    started = time.monotonic()
    submissions.flush()
    here = held.table()  # this process's own refs (a driver asking itself)
    task = _remote()
    alive = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    states = ask_each_node(
        alive, lambda options: task.options(**options).remote(_ANSWER_S), started + timeout
    )
    return _view(states, here)


def _view(states: list[dict[str, Any]], here: dict[str, Any]) -> HeldView:
    problems, tables, sites, seen = [], [], {}, set()
    for state in states:
        node = (state.get("node_id") or "?")[:12]
        if "error" in state:
            problems.append(f"node {node}: {state['error']}")
            continue
        problems.extend(
            f"process {pid} on node {node} did not answer within {_ANSWER_S:g} s"
            for pid in state["silent"]
        )
        sites.update(state["sites"])
        for table in state["tables"]:
            key = (state["root"], table.get("pid"))  # nodes of one machine share a directory
            if key not in seen:
                seen.add(key)
                tables.append(table)
    if here["rows"] and here["pid"] not in {table.get("pid") for table in tables}:
        tables.append(here)  # a driver asking itself (not also through its request pipe)
    resources, available = ray.cluster_resources(), ray.available_resources()
    capacity = int(resources.get("object_store_memory", 0))
    free = available.get("object_store_memory")
    address = ray.get_runtime_context().gcs_address
    return HeldView(
        f"cluster {address}",
        capacity,
        None if free is None else max(0, capacity - int(free)),
        group(tables, sites),
        len(tables),
        problems,
    )
