"""``StuckReport``: every call in flight, why it is not done, and the deadlocks among them.

Built from what each node said (:mod:`.inflight`: its files; the snapshots its processes
gave: where each running call is, what it waits on) and the cluster's resources; the
reasoning is :mod:`.waitfor`'s, the wording of the output :mod:`.stuck_render`'s.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from raytrace_kit._reports.reading.columns import seconds
from raytrace_kit._reports.stuck.frame_words import awaited, blocked_in, user_where
from raytrace_kit._reports.stuck.waitfor import DEADLOCK_FIX, Flight, Graph, cycles, stragglers

__all__ = ["DEADLOCK_FIX", "UNMOVED", "UNMOVED_S", "StuckReport", "alike", "build"]

UNMOVED = 0.9  # a call whose recent samples sat at one place this often has not moved...
UNMOVED_S = 5.0  # ...and has run this long (a call begun a moment ago, a short one, has not)


class StuckReport:
    """What a running Ray job is doing now, and why what is not done is not done.

    ``print()`` it (or ``str()``) in a terminal, display it in a notebook, or take
    :meth:`to_dict` (``raytrace-kit stuck --json``).

    Attributes:
        source: The cluster it was read from.
        taken: When (seconds since the epoch).
        flights: Every call in flight, running or pending (see ``waitfor.Flight``).
        deadlocks: Each cycle of calls waiting on one another, call by call.
        stuck: Running calls that reported themselves stuck (``call.stuck`` events).
        stragglers: Running calls far beyond their function's usual duration.
        waits: Threads outside calls blocked on calls (a driver in ``ray.get``).
        held_loops: Event loops held now by one call (an ``async def`` that blocks).
        nodes: Each node: its id, address, resources and whether it could be read.
        problems: What could not be read (a node, a process that did not answer).
        samples: By call id, where a sampled call's samples of the last seconds sat
            (``sample_calls.recent``): its place, their share, and that in words.
    """

    def __init__(  # noqa: PLR0917 -- built in one place, by build()
        self,
        source: str,
        taken: float,
        flights: list[Flight],
        deadlocks: list[list[Flight]],
        stuck: list[Flight],
        straggling: list[Flight],
        waits: list[dict[str, Any]],
        nodes: list[dict[str, Any]],
        problems: list[str],
        held_loops: list[dict[str, Any]] | None = None,
        samples: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.held_loops = held_loops or []
        self.samples = samples or {}
        self.source = source
        self.taken = taken
        self.flights = flights
        self.deadlocks = deadlocks
        self.stuck = stuck
        self.stragglers = straggling
        self.waits = waits
        self.nodes = nodes
        self.problems = problems

    @property
    def running(self) -> list[Flight]:
        """The calls in flight that have started."""
        return [f for f in self.flights if f.state == "running"]

    @property
    def pending(self) -> list[Flight]:
        """The calls submitted and not started."""
        return [f for f in self.flights if f.state == "pending"]

    def grouped(self, which: str) -> list[tuple[Flight, int]]:
        """Infeasible, stuck, straggling or all (``calls``) calls, alike once: :func:`alike`."""
        return alike(self.flights if which == "calls" else getattr(self, which))

    @property
    def infeasible(self) -> list[Flight]:
        """Pending calls no node can ever run (they ask for more than any node has)."""
        return [f for f in self.flights if f.reason == "infeasible"]

    def sampled(self, flight: Flight) -> dict[str, Any] | None:
        """Where ``flight``'s recent samples sat (``None``: not sampled lately)."""
        return self.samples.get(flight.call_id or "")

    def unmoved(self) -> list[Flight]:
        """Running calls not in ray.get whose recent samples sat at one place (a lock, a loop)."""
        held = {h.get("call_id") for h in self.held_loops}  # said there, with the fix
        return [
            f for f in self.running if f.waiting_in is None and f.age_s >= UNMOVED_S
            and (self.sampled(f) or {}).get("share", 0) >= UNMOVED and f.call_id not in held
        ]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Everything, as plain values (what ``--json`` prints)."""

        def _short(flight: Flight) -> dict[str, Any]:
            return {**_brief(flight), "samples": self.sampled(flight)}

        return {
            "source": self.source,
            "taken": self.taken,
            "running": len(self.running),
            "pending": len(self.pending),
            "deadlocks": [
                {"calls": [_short(f) for f in cycle], "fix": DEADLOCK_FIX}
                for cycle in self.deadlocks
            ],
            "infeasible": [_short(f) for f in self.infeasible],
            "stuck": [_short(f) for f in self.stuck],
            "stragglers": [_short(f) for f in self.stragglers],
            # The same, alike entries once each: the example (the oldest) and how many.
            "grouped": {
                which: [{"count": n, "example": _short(f)} for f, n in self.grouped(which)]
                for which in ("infeasible", "stuck", "stragglers", "calls")
            },
            "unmoved": [_short(f) for f in self.unmoved()],
            "waits": self.waits,
            "held_loops": self.held_loops,
            "calls": [{**asdict(f), "samples": self.sampled(f)} for f in self.flights],
            "nodes": self.nodes,
            "problems": self.problems,
        }

    def __str__(self) -> str:
        from raytrace_kit._reports.stuck.render import text  # noqa: PLC0415 -- rich, on use

        return text(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        from raytrace_kit._reports.stuck.render import html_card  # noqa: PLC0415

        return html_card(self)

    def save_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as one self-contained HTML file; return its path."""
        from raytrace_kit._html import page  # noqa: PLC0415

        target = Path(path)
        target.write_text(page("raytrace_kit: stuck?", self._repr_html_()), encoding="utf-8")
        return target

    def __repr__(self) -> str:
        return (
            f"<StuckReport of {self.source}: {len(self.running)} running, "
            f"{len(self.pending)} pending, {len(self.deadlocks)} deadlock(s)>"
        )


def alike(flights: list[Flight]) -> list[tuple[Flight, int]]:
    """Calls of one function in one state for one reason, once: the oldest, and how many.

    Nineteen calls of ``train`` pending because no node has a GPU are one entry, not
    nineteen blocks of the same words. Their order is the first one's.
    """
    groups: dict[tuple[str, str, str], list[Flight]] = {}
    for flight in flights:
        groups.setdefault((flight.function, flight.state, flight.why), []).append(flight)
    return [(max(group, key=_age), len(group)) for group in groups.values()]


def _age(flight: Flight) -> float:
    return flight.age_s


def _brief(flight: Flight) -> dict[str, Any]:
    return {
        "state": flight.state,
        "function": flight.function,
        "call_id": flight.call_id,
        "task_id": flight.task_id,
        "actor_id": flight.actor_id,
        "node_id": flight.node_id,
        "pid": flight.pid,
        "age_s": round(flight.age_s, 3),
        "where": flight.where,
        "why": flight.why,
        "reason": flight.reason,
        "stack": flight.stack,
        "operator": flight.operator,
    }


def build(
    source: str,
    states: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    *,
    now: float | None = None,
    problems: list[str] | None = None,
) -> StuckReport:
    """The report from each node's state (``inflight.in_flight`` and its processes' snapshots).

    Args:
        source: The cluster, as the header names it.
        states: Per node: ``in_flight`` (its files), ``snapshots`` (its processes' answers).
        nodes: Per node: ``node_id``, ``alive``, ``total`` and ``available`` resources.
        now: The time to measure ages against (now by default).
        problems: What could not be read, already known.
    """
    now = time.time() if now is None else now
    found = _Found()
    for state in states:
        found.read_files(state.get("in_flight") or {}, now)
    for state in states:  # the live answers, over what the files said
        for answer in state.get("snapshots", []):
            found.read_snapshot(answer, now)
    found.attach_stuck()
    flights = list(found.running.values())
    started = {f.task_id for f in flights if f.task_id}
    for flight in flights:
        flight.submission = found.records.get(flight.task_id or "")
    for task_id, record in found.records.items():
        if task_id not in started:
            flights.append(_pending(record, now))
    graph = Graph(flights, nodes, found.actors)
    graph.explain()
    for wait in found.waits:
        wait["on"] = [graph.by_task[t].name() for t in wait["task_ids"] if t in graph.by_task]
    flights.sort(key=lambda f: (f.state != "running", -f.age_s))
    return StuckReport(
        source,
        now,
        flights,
        cycles(graph),
        [f for f in flights if f.stuck_reports],
        stragglers(flights, found.durations),
        found.waits,
        nodes,
        list(problems or []),
        found.held,
        {k: v for state in states for k, v in (state.get("samples") or {}).items()},
    )


class _Found:
    """What the nodes said, merged: running calls by id, records by task, actors, waits."""

    def __init__(self) -> None:
        self.running: dict[str, Flight] = {}
        self.records: dict[str, dict[str, Any]] = {}
        self.actors: dict[str, dict[str, Any]] = {}
        self.durations: dict[str, list[float]] = {}
        self.stuck_events: dict[str, dict[str, Any]] = {}
        self.waits: list[dict[str, Any]] = []
        self.held: list[dict[str, Any]] = []  # event loops held now, by process

    def read_files(self, found: dict[str, Any], now: float) -> None:
        for call in found.get("running", []):
            self.running[call["call_id"]] = _running(call, now)
        for record in found.get("submissions", []):
            self.records[record["task_id"]] = record
        self.actors.update(found.get("actors", {}))
        for name, sample in found.get("durations", {}).items():
            self.durations.setdefault(name, []).extend(sample)
        for event in found.get("stuck", []):
            self.stuck_events[event["call_id"]] = event

    def read_snapshot(self, answer: dict[str, Any], now: float) -> None:
        for call in answer.get("calls", []):
            flight = self.running.get(call["call_id"])
            if flight is None:
                flight = self.running[call["call_id"]] = _running(call, now)
            flight.age_s = call["running_s"]
            flight.operator = flight.operator or call.get("operator")
            _waits_on(flight, call.get("stack") or [], call.get("waiting_on"), "live")
            if call.get("async") and flight.stack:  # a suspended coroutine: at an await
                flight.awaiting, flight.blocked_in = awaited(flight.stack), None
        self.waits.extend(_outside_calls(answer))
        for held in answer.get("loops_held", []):
            self.held.append({**held, "node_id": answer.get("node_id"), "pid": answer.get("pid")})
            holder = self.running.get(held.get("call_id") or "")
            if holder is None:
                continue
            holder.holds_loop_s = held.get("held_s")
            if not holder.stack and held.get("stack"):  # running, so no coroutine stack
                _waits_on(holder, held["stack"], None, "live")
            for call in answer.get("calls", []):  # the others on that loop cannot resume
                other = self.running.get(call["call_id"])
                if call.get("async") and other is not None and other is not holder:
                    other.loop_held_by = holder

    def attach_stuck(self) -> None:
        for call_id, event in self.stuck_events.items():
            flight = self.running.get(call_id)
            if flight is None:
                continue
            flight.stuck_reports = int(event.get("report") or 1)
            if not flight.seen:  # the process did not answer: its last stuck event says where
                _waits_on(flight, event.get("stack") or [], event.get("waiting_on"), "call.stuck")


def _running(call: dict[str, Any], now: float) -> Flight:
    started = call.get("started") or ""
    return Flight(
        state="running",
        key=call["call_id"],
        function=call.get("function") or "?",
        kind=call.get("kind"),
        operator=call.get("operator"),
        task_id=call.get("task_id"),
        call_id=call["call_id"],
        actor_id=call.get("actor_id"),
        node_id=call.get("node_id"),
        pid=call.get("pid"),
        age_s=max(now - seconds(started), 0.0) if started else 0.0,
    )


def _pending(record: dict[str, Any], now: float) -> Flight:
    return Flight(
        state="pending",
        key=f"task:{record['task_id']}",
        function=record.get("function") or "?",
        kind=record.get("kind"),
        task_id=record["task_id"],
        call_id=None,
        actor_id=record.get("actor_id"),
        node_id=None,
        pid=None,
        age_s=max(now - seconds(record.get("timestamp") or ""), 0.0),
        where=record.get("site"),
        submission=record,
    )


def _waits_on(
    flight: Flight, stack: list[list[Any]], waiting: dict[str, Any] | None, seen: str
) -> None:
    flight.stack, flight.seen = [list(frame) for frame in stack], seen
    flight.where = user_where(flight.stack) or flight.where
    flight.blocked_in = blocked_in(flight.stack)
    if waiting:
        flight.waiting_in = waiting.get("what")
        flight.waiting_refs = int(waiting.get("refs") or 0)
        flight.waiting_on = list(waiting.get("task_ids") or [])


def _outside_calls(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The threads of one process blocked on refs outside any call (a driver's ray.get)."""
    found = []
    for wait in answer.get("waits", []):
        waiting = wait.get("waiting_on") or {}
        found.append(
            {
                "process": "driver" if not answer.get("is_worker") else "worker",
                "pid": answer.get("pid"),
                "node_id": answer.get("node_id"),
                "thread": wait.get("thread"),
                "where": user_where(wait.get("stack") or []),
                "stack": wait.get("stack") or [],
                "waiting_in": waiting.get("what"),
                "refs": waiting.get("refs"),
                "task_ids": list(waiting.get("task_ids") or []),
            }
        )
    return found
