"""``timeline()``: a run as a Chrome trace / Perfetto file, one slice per call.

One process lane per (node, process), named after both; within it, calls that overlap
(threaded or async actors) get separate rows. Each slice carries the call's ids, status
and memory in ``args``; failed calls are coloured as errors, interrupted ones run to the
end of the trace. A flow arrow goes from each call to the calls submitted during it
(``parent_call_id``). A driver with its own record (``instrument()``, ``raytrace-kit run``)
gets a lane on top: its run, each ``ray.get``/``ray.wait`` it blocked in, and an arrow to
each call it submitted. Open the file in https://ui.perfetto.dev or ``chrome://tracing``.
"""

from __future__ import annotations

import heapq
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.reading.driver import Wait, driver_runs
from raytrace_kit._reports.reading.session import Session, open_session

__all__ = ["timeline"]

# Colour names the trace viewers reserve: failed and interrupted calls stand out.
_COLOURS = {"error": "terrible", "interrupted": "bad"}


def _micros(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp() * 1e6


def _args(call: Call) -> dict[str, Any]:
    fields = {
        "call_id": call.call_id,
        "status": call.status,
        "task_id": call.task_id,
        "task_name": call.task_name,
        "actor_id": call.actor_id,
        "node_id": call.node_id,
        "worker_id": call.worker_id,
        "attempt": call.attempt,
        "parent_call_id": call.parent_call_id,
        "cpu_s": call.cpu_s,
        "rss_start_bytes": call.rss_start_bytes,
        "rss_end_bytes": call.rss_end_bytes,
        "rss_growth_bytes": call.rss_growth_bytes,
        "error_type": call.error_type,
        "error": call.error,
    }
    return {key: value for key, value in fields.items() if value is not None}


class _Lanes:
    """Numbers for (node, pid) lanes and, within each, rows for overlapping calls.

    Calls come in order of start; each takes the lowest row free by its start. Per lane,
    the rows in use wait in a heap by their end and the rows free again in a heap by
    number, so a call costs a few heap steps however many calls run at once.
    """

    def __init__(self) -> None:
        self.processes: dict[tuple[str | None, int | None], int] = {}
        self.busy: dict[int, list[tuple[float, int]]] = {}  # lane -> (end, row) of rows in use
        self.free: dict[int, list[int]] = {}  # lane -> rows free again
        self.rows: dict[int, int] = {}  # lane -> rows made

    def process(self, call: Call) -> int:
        key = (call.node_id, call.pid)
        lane = self.processes.get(key)
        if lane is None:
            lane = self.processes[key] = len(self.processes) + 1
            self.busy[lane], self.free[lane], self.rows[lane] = [], [], 0
        return lane

    def row(self, lane: int, start: float, end: float) -> int:
        busy, free = self.busy[lane], self.free[lane]
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            row = heapq.heappop(free)
        else:
            row = self.rows[lane] = self.rows[lane] + 1
        heapq.heappush(busy, (end, row))
        return row


def _trace(
    calls: list[Call], drivers: list[tuple[dict[str, Any], list[Wait]]] | None = None
) -> list[dict[str, Any]]:
    timed = [c for c in calls if c.started]
    if not timed and not drivers:
        return []
    last = max((_micros(c.ended or c.started) for c in timed), default=0.0)
    lanes = _Lanes()
    events: list[dict[str, Any]] = []
    placed: dict[str, tuple[int, int, float, float]] = {}  # call_id -> pid, tid, ts, end
    for call in sorted(timed, key=lambda c: c.started):
        start = _micros(call.started)
        if call.ended is not None:
            end = _micros(call.ended)
        elif call.duration_s is not None:
            end = start + call.duration_s * 1e6
        else:
            end = last  # interrupted: it was still running when the records end
        end = max(end, start + 1)
        pid = lanes.process(call)
        tid = lanes.row(pid, start, end)
        slice_: dict[str, Any] = {
            "ph": "X",
            "cat": call.kind or "call",
            "name": call.function.rsplit(".", 2)[-1] if call.kind == "task" else _short(call),
            "ts": round(start, 3),
            "dur": round(end - start, 3),
            "pid": pid,
            "tid": tid,
            "args": _args(call),
        }
        colour = _COLOURS.get(call.status)
        if colour is not None:
            slice_["cname"] = colour
        events.append(slice_)
        placed[call.call_id] = (pid, tid, start, end)
    events.extend(_flows(timed, placed))
    events.extend(_driver_lanes(drivers or [], timed, placed, len(lanes.processes), last))
    for (node, pid_number), lane in lanes.processes.items():
        label = f"node {node[:12] if node else '?'} · pid {pid_number}"
        events.append({"ph": "M", "name": "process_name", "pid": lane, "args": {"name": label}})
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": lane, "args": {"sort_index": lane}}
        )
    return events


def _short(call: Call) -> str:
    parts = call.function.split(".")
    return ".".join(parts[-2:])


def _flows(
    calls: list[Call], placed: dict[str, tuple[int, int, float, float]]
) -> list[dict[str, Any]]:
    """An arrow from each parent's slice to each child's start (ids pair the two ends)."""
    flows: list[dict[str, Any]] = []
    for number, call in enumerate(calls, start=1):
        parent = placed.get(call.parent_call_id or "")
        child = placed.get(call.call_id)
        if parent is None or child is None:
            continue
        p_pid, p_tid, p_start, p_end = parent
        c_pid, c_tid, c_start, _ = child
        departs = min(max(c_start, p_start), p_end)  # inside the parent's slice
        common = {"cat": "submit", "name": "submitted", "id": number, "bp": "e"}
        flows.append({"ph": "s", "pid": p_pid, "tid": p_tid, "ts": round(departs, 3), **common})
        flows.append({"ph": "f", "pid": c_pid, "tid": c_tid, "ts": round(c_start, 3), **common})
    return flows


def _driver_lanes(
    drivers: list[tuple[dict[str, Any], list[Wait]]],
    calls: list[Call],
    placed: dict[str, tuple[int, int, float, float]],
    lanes: int,
    last: float,
) -> list[dict[str, Any]]:
    """A lane per driver, on top: its run (row 1), its waits (row 2), arrows to its calls.

    The arrows go to the calls without a parent call (submitted by a driver, not from
    inside a call) of the driver's job that started during its run.
    """
    events: list[dict[str, Any]] = []
    spans: list[tuple[int, float, float, str | None]] = []
    for number, (run, waits) in enumerate(drivers, start=1):
        lane = lanes + number
        starts = [_micros(w.started) for w in waits]
        begin = _micros(run["started"]) if run.get("started") else min(starts, default=last)
        end = _micros(run["ended"]) if run.get("ended") else max(last, begin + 1)
        events.append({
            "ph": "X", "cat": "driver", "name": f"run {run.get('script') or '?'}",
            "ts": round(begin, 3), "dur": round(max(end - begin, 1), 3), "pid": lane, "tid": 1,
            "args": {k: v for k, v in run.items() if v is not None},
        })  # fmt: skip
        for wait, start in zip(waits, starts, strict=True):
            events.append({
                "ph": "X", "cat": "driver", "name": wait.verb, "ts": round(start, 3),
                "dur": round(max(wait.blocked_s * 1e6, 1), 3), "pid": lane, "tid": 2,
                "args": {"where": wait.where, "function": wait.function, "refs": wait.refs,
                         "submitted_since_last_wait": wait.submitted,
                         "error_type": wait.error_type},
            })  # fmt: skip
        label = f"driver · {run.get('script') or '?'} · pid {run.get('pid', '?')}"
        events.append({"ph": "M", "name": "process_name", "pid": lane, "args": {"name": label}})
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": lane, "args": {"sort_index": -number}}
        )
        spans.append((lane, begin, end, run.get("job_id")))
    for number, call in enumerate(calls, start=1):
        child = placed.get(call.call_id)
        if call.parent_call_id or child is None or call.mode == "local":
            continue
        c_pid, c_tid, c_start, _ = child
        for lane, begin, end, job in spans:
            if begin <= c_start <= end and (job is None or call.job_id in {job, None}):
                common = {"cat": "submit", "name": "submitted", "id": f"d{number}", "bp": "e"}
                events.append({"ph": "s", "pid": lane, "tid": 1, "ts": round(c_start, 3), **common})
                events.append(
                    {"ph": "f", "pid": c_pid, "tid": c_tid, "ts": round(c_start, 3), **common}
                )
                break
    return events


def timeline(
    source: str | os.PathLike[str] | Session | None = None,
    path: str | os.PathLike[str] | None = None,
    *,
    merge_ray: bool = False,
) -> Path:
    """Write a run's calls as a Chrome trace / Perfetto JSON file; return its path.

    Args:
        source: What :func:`raytrace_kit.open_session` takes, or a session.
        path: Where to write. Default: ``timeline.json`` in the session's directory.
        merge_ray: Also add ``ray.timeline()``'s events (Ray must be initialized, on the
            cluster that ran the calls).

    Returns:
        The file written.
    """
    session = source if isinstance(source, Session) else open_session(source)
    events = _trace(session.calls(), driver_runs(session.driver_files()))
    if merge_ray:
        import ray  # noqa: PLC0415 -- only when asked: reading needs no Ray

        events.extend(ray.timeline())
    target = Path(path) if path is not None else _default_path(session)
    target.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return target


def _default_path(session: Session) -> Path:
    root = session.root if session.root.is_dir() else session.root.parent
    return root / "timeline.json"
