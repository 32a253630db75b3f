"""``stuck()``: what a running job is doing now, read through Ray itself from every node.

One small task per alive node, pinned there (hard node affinity, no CPU: it runs even
when the node's CPUs are all held), asks each process of the node that runs or submits
debuggable calls for a snapshot (through its request pipe: where each running call is
and what it waits on), then reads the node's event files for what is in flight (the
calls running, the calls submitted and not started). Only that travels back. Nodes of one
machine that share a log directory are read once. No dashboard, no SSH, no ptrace.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytrace_kit import _process, _ray_compat, _registry
from raytrace_kit._driver.collect import unanswered
from raytrace_kit._output import paths, submissions
from raytrace_kit._reports.profiles import recent
from raytrace_kit._reports.stuck import StuckReport, build, in_flight, started_or_ended
from raytrace_kit._worker import stack_server
from raytrace_kit._worker.snapshot import snapshot
from raytrace_kit.exceptions import UsageError

__all__ = ["stuck"]

_ANSWER_S = 3.0  # a process that has not answered by then is named, not waited for


def _node_state(request: str, answer_s: float) -> dict[str, Any]:
    """On the node: its processes' snapshots, then what its event files have in flight."""
    root = paths.log_dir()
    node_id = _process.process_identity().node_id
    claim = root / "stacks" / f"stuck-{request}.claim"
    try:
        claim.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, (node_id or "").encode())
        os.close(fd)
    except FileExistsError:  # another node of this machine reads this directory
        return {"node_id": node_id, "root": str(root), "same_as": claim.read_text()}
    _forget_old_claims(claim.parent)
    snapshots, silent = _snapshots(answer_s)
    return {
        "node_id": node_id,
        "root": str(root),
        "snapshots": snapshots,
        "silent": silent,
        "in_flight": in_flight([root]),
        "samples": recent([root]),  # where each sampled call sat in the last seconds
    }


_CLAIM_KEPT_S = 600.0  # a claim outlives every node task of its stuck() call by far


def _forget_old_claims(directory: Path) -> None:
    """Remove the claims of earlier stuck() calls (one small file each, per directory)."""
    now = time.time()
    for old in directory.glob("stuck-*.claim"):
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > _CLAIM_KEPT_S:
                old.unlink()


def _snapshots(answer_s: float) -> tuple[list[dict[str, Any]], list[int]]:
    """Ask every live process of this node that serves requests, in parallel."""
    me = os.getpid()
    asked = [(pid, fifo) for pid, fifo in stack_server.fifos() if pid != me and _alive(pid)]
    if not asked:
        return [], []

    def ask(item: tuple[int, Path]) -> dict[str, Any] | int:
        try:
            return stack_server.ask(item[1], {"kind": "snapshot"}, answer_s)
        except (stack_server.NoStacksServerError, TimeoutError, OSError, ValueError):
            return item[0]

    with ThreadPoolExecutor(max_workers=min(16, len(asked))) as pool:
        answers = list(pool.map(ask, asked))
    return [a for a in answers if isinstance(a, dict)], [a for a in answers if isinstance(a, int)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: not ours to ask
        return False
    return True


def _seen(roots: list[str], task_ids: list[str]) -> list[str]:
    """On a node: which of ``task_ids`` started or ended there (phase two)."""
    return started_or_ended([Path(root) for root in roots], task_ids)


@_registry.cleared_on_reset
@functools.cache
def _remotes() -> tuple[Any, Any]:
    remote = _ray_compat.ray_remote(num_cpus=0, max_retries=0)
    return (
        _ray_compat.mark_kit_remote(remote(_node_state)),
        _ray_compat.mark_kit_remote(remote(_seen)),
    )


def stuck(*, timeout: float = 30.0) -> StuckReport:
    """What every call in flight on the connected cluster is doing now, and why.

    For each call running or submitted and not started: its age, node and the line of the
    user's code it is at; for a pending call why it has not started (no node can ever run
    it, its resources are held by the named calls, its arguments are not made yet, its
    actor is busy with the named call); for a running call blocked in ``ray.get`` or
    ``await`` the calls it waits on. Every cycle of calls waiting on one another is named
    as a deadlock, call by call, with the fix; calls past their ``stuck_after`` and
    stragglers come with their live stacks. Read through Ray (a small task on each node),
    without the dashboard, SSH or ptrace; it works while the job hangs.

    Without Ray (local mode), it reports this process's calls.

    Args:
        timeout: Seconds to wait for all nodes (a node that does not answer is named).

    Returns:
        A :class:`StuckReport`: ``print()`` it, display it in a notebook, or
        ``to_dict()`` it.

    Raises:
        UsageError: Ray is not initialized and no local-mode call runs here.

    Example:
        >>> import raytrace_kit
        >>> print(raytrace_kit.stuck())  # doctest: +SKIP
    """
    if not ray.is_initialized():
        return _here()
    started = time.monotonic()
    request = os.urandom(6).hex()
    submissions.flush()  # this driver's own records: in its file before the nodes read it
    nodes = _nodes()
    alive = [n for n in nodes if n["alive"]]
    node_task, _ = _remotes()
    by_id = {n["node_id"]: n for n in alive}

    def down(node_id: str) -> str | None:  # a node whose raylet does not answer: said now
        node = by_id[node_id]
        return unanswered({"NodeManagerAddress": node["address"], "NodeManagerPort": node["port"]})

    states = ask_each_node(
        [n["node_id"] for n in alive],
        lambda options: node_task.options(**options).remote(request, _ANSWER_S),
        started + timeout,
        down=down,
    )
    problems = _problems(states)
    _second_phase(states, timeout, started)
    address = ray.get_runtime_context().gcs_address
    return build(f"cluster {address}", states, nodes, problems=problems)


def _nodes() -> list[dict[str, Any]]:
    """Every node: id, address, alive, its total and available resources."""
    available = {}
    with contextlib.suppress(Exception):  # older Rays, a GCS hiccup: totals still say a lot
        available = _ray_compat.available_per_node()
    return [
        {
            "node_id": node["NodeID"],
            "address": node.get("NodeManagerAddress"),
            "port": node.get("NodeManagerPort"),
            "alive": bool(node.get("Alive")),
            "total": {k: float(v) for k, v in (node.get("Resources") or {}).items()},
            "available": {k: float(v) for k, v in available.get(node["NodeID"], {}).items()},
        }
        for node in ray.nodes()
    ]


def _problems(states: list[dict[str, Any]]) -> list[str]:
    found = []
    for state in states:
        if "error" in state:
            found.append(f"node {state['node_id'][:12]}: {state['error']}")
        for pid in state.get("silent", []):
            found.append(
                f"process {pid} on node {state['node_id'][:12]} did not answer within "
                f"{_ANSWER_S:g} s (holding the GIL?): its calls are shown from its files"
            )
    return found


def _second_phase(states: list[dict[str, Any]], timeout: float, started: float) -> None:
    """With several directories, drop submissions whose calls ran in another one."""
    read = [s for s in states if s.get("in_flight") is not None]
    if len(read) < 2:
        return
    running = {c["task_id"] for s in read for c in s["in_flight"]["running"]}
    wanted = sorted(
        {
            r["task_id"]
            for s in read
            for r in s["in_flight"]["submissions"]
            if r["task_id"] not in running
        }
    )
    if not wanted:
        return
    _, seen_task = _remotes()
    refs = [
        seen_task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(s["node_id"], soft=False)
        ).remote([s["root"]], wanted)
        for s in read
    ]
    left = max(timeout - (time.monotonic() - started), 1.0)
    try:
        done = {task for found in ray.get(refs, timeout=left) for task in found}
    except Exception:
        return
    for state in read:
        state["in_flight"]["submissions"] = [
            r for r in state["in_flight"]["submissions"] if r["task_id"] not in done
        ]


def _here() -> StuckReport:
    """Local mode without Ray: this process's running calls, from its own snapshot."""
    from raytrace_kit._local import state as local_state  # noqa: PLC0415

    if not local_state.state.active:
        msg = (
            "stuck() reads a running Ray cluster, and Ray is not initialized here. Call "
            "ray.init(address=...) first (or use `raytrace-kit stuck --address HOST:PORT` "
            "from a shell), or run your calls in local mode to inspect them here."
        )
        raise UsageError(msg)
    state = {"node_id": None, "snapshots": [snapshot()], "in_flight": None}
    return build(f"this process (pid {os.getpid()}, local mode)", [state], [])


def ask_each_node(
    node_ids: list[str],
    submit: Callable[[dict[str, Any]], Any],
    deadline: float,
    *,
    down: Callable[[str], str | None] | None = None,
) -> list[dict[str, Any]]:
    """One task on each node, all at once; each answer, or the node named with its error.

    ``submit`` takes the task's ``.options()`` (pinned to the node) and returns its ref;
    ``deadline`` is ``time.monotonic()``'s by which all must answer (each gets a second at
    least); ``down``, asked first in each node's thread, says why a node cannot answer
    (``None``: it can).
    """

    def read(node_id: str) -> dict[str, Any]:
        reason = None if down is None else down(node_id)
        if reason is not None:
            return {"node_id": node_id, "error": reason}
        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        ref = submit({"scheduling_strategy": strategy})
        try:
            return ray.get(ref, timeout=max(deadline - time.monotonic(), 1.0))  # type: ignore[no-any-return]
        except Exception as exc:  # a node that fails is named, not raised
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
            return {"node_id": node_id, "error": f"{type(exc).__name__}: {exc}"[:300]}

    with ThreadPoolExecutor(max_workers=max(1, len(node_ids))) as pool:
        return list(pool.map(read, node_ids))
