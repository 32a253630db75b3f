"""Calls without an end: whether each one's process died, and why, from Ray's records.

A ``call.start`` with no ``call.end`` is a call cut off, or one still running. Ray's
records of worker exits (:class:`RayLogs`: read here, or asked of a cluster's nodes) say
which, and why it died; the dead get one finding per cause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.explain.deaths import (
    WorkerDeath,
    death_finding,
    find_ray_logs,
    worker_deaths,
)
from raytrace_kit._reports.explain.linking import still_running
from raytrace_kit._reports.run.finding import Finding

if TYPE_CHECKING:
    from raytrace_kit._reports.run.tally import Tally

__all__ = ["FORCE_CANCELLED", "RayLogs", "death_findings"]


FORCE_CANCELLED = "was ended by ray.cancel(force=True), which kills the worker running the call"


@dataclass
class RayLogs:
    """Ray's records of worker deaths, and whether a call's process still lives.

    Read here for files on this machine (:meth:`here`); a cluster's report asks its nodes.
    """

    path: Path | None
    deaths: Callable[[Iterable[str]], dict[str, WorkerDeath]]
    alive: Callable[[dict[str, Any]], bool]

    @classmethod
    def here(cls, root: Path) -> RayLogs:
        """The Ray logs in or above ``root``, and this machine's processes."""
        logs = find_ray_logs(root)
        return cls(
            logs,
            (lambda ids: worker_deaths(logs, ids)) if logs else (lambda ids: {}),
            lambda row: still_running(row["pid"], row["started"]),
        )


def death_findings(tally: Tally, ray_logs: RayLogs, killed: set[str]) -> list[Finding]:
    """Why the processes of calls without an end died, from Ray's records.

    Each row gets ``state`` (``died``, or ``running``: its process is alive) and
    ``cause``; the dead get findings. ``killed``: the tasks ``ray.cancel(force=True)``
    ended (their ``call.cancel`` records): asked for, so no finding, and no guess.
    """
    if not tally.interrupted_count:
        return []
    rows = tally.interrupted
    logs = ray_logs.path
    deaths = ray_logs.deaths(row["worker_id"] for row in rows)
    by_kind: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for row in rows:
        if row["task_id"] in killed:
            row.update(state="died", cause=FORCE_CANCELLED, exit_type=None, fix=None)
            continue
        death = deaths.get(row["worker_id"] or "")
        if death is not None:  # weighed against the memory its process held
            death = replace(death, held=row.get("rss_start_bytes"))
        running = death is None and ray_logs.alive(row)
        row["state"] = "running" if running else "died"
        row["cause"] = death.cause if death else ("still running, no end yet" if running else None)
        row["exit_type"] = death.exit_type if death else None
        row["fix"] = death.fix if death else None
        if not running:  # one finding per cause: a small process killed is not a big one
            key = (death.kind, death.little_memory) if death else ("unknown", False)
            by_kind.setdefault(key, []).append(row)
    found = []
    for (kind, _), group in by_kind.items():
        functions = ", ".join(sorted({row["function"] for row in group}))
        title, evidence, fix = death_finding(kind, len(group), functions, group[0], logs)
        found.append(Finding(title, evidence, fix, f"death_{kind}", functions))
    return found
