"""What a node's event files say is in flight now: calls running, calls submitted not started.

Read on the node itself (``stuck()`` sends a small task there, as ``collect()`` does), so
only what is in flight travels: the calls whose ``call.start`` has no ``call.end`` and
whose process still lives, the ``call.submit`` records of this node's processes whose
calls have neither started nor ended here, the last ``call.stuck`` of each running call,
and a sample of each function's finished durations (what "far beyond its usual
duration" is measured against). Ray is not needed: any directory of event files reads.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call, Stuck, Submission
from raytrace_kit._reports.explain.linking import still_running
from raytrace_kit._reports.reading.calls import distinct_processes, iter_calls
from raytrace_kit._reports.reading.session_list import EVENT_GLOB

__all__ = ["SAMPLE", "in_flight", "started_or_ended"]

SAMPLE = 256  # finished durations kept per function (a uniform sample)

_OTHER = msgspec.json.Decoder(dict[str, Any]).decode
_SUBMIT = msgspec.json.Decoder(Submission).decode
_STUCK = msgspec.json.Decoder(Stuck).decode


def _files(roots: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for root in roots:
        found.extend(sorted(root.rglob(EVENT_GLOB)) if root.is_dir() else [root])
    return found


def running_call(call: Call) -> dict[str, Any]:
    """What travels of a running call (its ``call.start``)."""
    return {
        "call_id": call.call_id,
        "function": call.function,
        "kind": call.kind,
        "operator": call.operator,  # a Ray Data UDF's
        "mode": call.mode,
        "task_id": call.task_id,
        "actor_id": call.actor_id,
        "node_id": call.node_id,
        "pid": call.pid,
        "attempt": call.attempt,
        "started": call.started,
        "parent_call_id": call.parent_call_id,
        "parent_task_id": call.parent_task_id,
    }


def in_flight(roots: Iterable[Path], *, alive: bool = True) -> dict[str, Any]:
    """The in-flight state of the event files under ``roots`` (directories or files).

    Args:
        roots: This node's log directories of the kit (or event files).
        alive: Count a call without an end as running only if its process lives here
            (the node's own view); ``False`` counts every such call (files read
            elsewhere, after the fact).

    Returns:
        A dict of plain values: ``running`` (calls), ``submissions`` (the records of this
        node's submissions still in flight: not started here, or running here),
        ``actors`` (each actor created here: its ``max_concurrency`` and whether it is
        async), ``stuck`` (the last ``call.stuck`` of each running call), ``durations``
        (function -> a sample of finished durations, seconds), ``ended`` (finished calls
        counted) and ``dead`` (calls whose process died during them).
    """
    running: dict[str, dict[str, Any]] = {}
    started: set[str] = set()
    finished: set[str] = set()
    submissions: dict[str, Submission] = {}
    stuck: dict[str, Stuck] = {}
    cancelled: set[str] = set()
    durations: dict[str, list[float]] = {}
    seen: dict[str, int] = {}
    ended = dead = 0
    for group in distinct_processes(_files(roots)):
        for call in iter_calls(
            group, others=lambda raw: _other(raw, submissions, stuck, cancelled)
        ):
            if call.task_id:
                started.add(call.task_id)
            if call.status != "interrupted":
                ended += 1
                if call.task_id:
                    finished.add(call.task_id)
                if call.duration_s is not None:
                    _sample(durations, seen, call.function, call.duration_s)
            elif not alive or still_running(call.pid, call.started):
                running[call.call_id] = running_call(call)
            else:
                dead += 1
    running_tasks = {call["task_id"] for call in running.values()}
    kept = _in_flight_records(submissions, started - running_tasks, finished | cancelled, alive)
    actors = {
        record.actor_id: {
            "function": record.function,
            "max_concurrency": record.max_concurrency,
            "async": record.is_async,
        }
        for record in submissions.values()
        if record.kind == "actor_init" and record.actor_id
    }
    return {
        "running": list(running.values()),
        "submissions": kept,
        "actors": actors,
        "stuck": [msgspec.structs.asdict(s) for cid, s in stuck.items() if cid in running],
        "durations": durations,
        "ended": ended,
        "dead": dead,
    }


def _in_flight_records(
    submissions: dict[str, Submission], gone: set[str], over: set[str], alive: bool
) -> list[dict[str, Any]]:
    """The records of calls still in flight: not started here, or running here.

    Not in flight: a call ended or cancelled (``over``), one started here whose process
    died (``gone``), one whose submitter is gone (Ray cancels what a dead owner submitted;
    known only where the submitter ran, here, when ``alive``).
    """
    owners: dict[int | None, bool] = {}
    kept = []
    for task_id, record in submissions.items():
        if task_id in over or task_id in gone:
            continue
        if alive:
            owner = owners.get(record.pid)
            if owner is None:
                owner = owners[record.pid] = still_running(record.pid, record.timestamp)
            if not owner:
                continue
        kept.append(_plain(record))
    return kept


def _plain(record: Submission) -> dict[str, Any]:
    plain = msgspec.structs.asdict(record)
    plain["async"] = plain.pop("is_async")
    return plain


def _other(
    raw: bytes, submissions: dict[str, Submission], stuck: dict[str, Stuck], cancelled: set[str]
) -> None:
    try:
        if b'"event":"call.cancel"' in raw[:120]:
            found = _OTHER(raw).get("task_id")
            if isinstance(found, str):
                cancelled.add(found)
            return
        if b'"event":"call.submit"' in raw[:120]:
            record = _SUBMIT(raw)
            if record.task_id:
                submissions[record.task_id] = record
        elif b'"event":"call.stuck"' in raw[:120]:
            event = _STUCK(raw)
            stuck[event.call_id] = event  # the last one of each call wins
        elif _OTHER(raw).get("event") == "call.submit":  # another writer's spacing
            record = _SUBMIT(raw)
            if record.task_id:
                submissions[record.task_id] = record
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass  # a line cut short by a killed process


def _sample(
    durations: dict[str, list[float]], seen: dict[str, int], name: str, value: float
) -> None:
    """Keep a uniform sample of at most :data:`SAMPLE` durations per function."""
    count = seen.get(name, 0) + 1
    seen[name] = count
    kept = durations.setdefault(name, [])
    if len(kept) < SAMPLE:
        kept.append(value)
    else:
        slot = random.randrange(count)  # noqa: S311 -- a sample, not a secret
        if slot < SAMPLE:
            kept[slot] = value


def started_or_ended(roots: Iterable[Path], task_ids: Iterable[str]) -> list[str]:
    """Which of ``task_ids`` have a ``call.start`` or ``call.end`` under ``roots``."""
    wanted = set(task_ids)
    found: set[str] = set()
    for group in distinct_processes(_files(roots)):
        for call in iter_calls(group):
            if call.task_id in wanted:
                found.add(call.task_id)
    return sorted(found)
