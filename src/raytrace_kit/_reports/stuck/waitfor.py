"""Why each call in flight is not done: what it waits on, the wait-for graph, and its cycles.

A running call blocked in ``ray.get`` waits on the calls that produce its refs; a pending
call waits for resources, for its arguments, for its actor to be created or for a free
slot on its actor. Edges of the graph go from a call to the calls it waits on; a cycle in
it is a deadlock: each call waits on the next, and none can finish.

Which waits count for a deadlock: waiting on every ref of a ``ray.get``, on every argument,
on an actor's running calls when it has no free slot (``max_concurrency``), on an actor's
creation. Not counted: a ``ray.wait`` on several refs (any one may do), and resources
(Ray lends a task's CPU to others while it blocks in ``ray.get``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from raytrace_kit._reports.stuck.frame_words import doing
from raytrace_kit._reports.stuck.resources import fits, fmt_resources, room

__all__ = ["DEADLOCK_FIX", "Flight", "Graph", "cycles", "stragglers"]

DEADLOCK_FIX = (
    "each of these calls waits on the next, so none can finish. Break the cycle: do not "
    "call back into an actor from a call it is running (pass refs along and ray.get them "
    "outside the actor, or return a ref instead of ray.get-ing it inside); or let the "
    "actor that is called back run calls concurrently: make its methods async "
    "(async def, await the refs) or give it max_concurrency > 1"
)


@dataclass(slots=True)
class Flight:
    """One call in flight: running (it has a ``call.start``) or pending (only submitted).

    Attributes:
        state: ``"running"`` or ``"pending"``.
        key: Its node in the graph: the call id, or ``task:<id>`` for a pending call.
        age_s: Seconds since it started (running) or was submitted (pending).
        where: ``file:line`` where it is now (running) or where it was submitted.
        stack: The user's frames ``[file, line, function, source]``, outermost first.
        seen: Where the stack comes from: ``live`` (asked now), ``call.stuck`` (its last
            stuck event: the process did not answer) or ``""`` (not known).
        waiting_on: Task ids it waits on (running: a ``ray.get``'s refs).
        waiting_in: ``ray.get``, ``ray.wait`` or ``await`` (running), or ``None``.
        why: Why it is not done, in words; ``reason`` the kind of it.
        edges: Keys of the calls it waits on (in the graph).
        submission: Its ``call.submit`` record, if any.
    """

    state: str
    key: str
    function: str
    kind: str | None
    task_id: str | None
    call_id: str | None
    actor_id: str | None
    node_id: str | None
    pid: int | None
    age_s: float
    where: str | None = None
    stack: list[list[Any]] = field(default_factory=list)
    seen: str = ""
    waiting_on: list[str] = field(default_factory=list)
    waiting_in: str | None = None
    waiting_refs: int = 0
    why: str = ""
    reason: str = ""
    edges: list[str] = field(default_factory=list)
    stuck_reports: int = 0
    submission: dict[str, Any] | None = None
    operator: str | None = None  # a Ray Data UDF's operator (``MapBatches(clean)``)
    blocked_in: str | None = None  # the standard library's innermost frame: ``wait() in ...``
    awaiting: str | None = None  # a suspended async call's await: ``asyncio.sleep()`` (or "")
    holds_loop_s: float | None = None  # an async call holding its event loop this long
    loop_held_by: Flight | None = None  # a suspended async call's loop, held by that call

    def name(self) -> str:
        """The call as a person names it: function, and call id or task id."""
        short = self.function.rsplit(".", 2)
        shown = ".".join(short[-2:]) if self.kind in {"actor_method", "actor_init"} else short[-1]
        ident = f"call {self.call_id}" if self.call_id else f"task {(self.task_id or '?')[:16]}"
        return f"{shown} ({ident})" + (f" in {self.operator}" if self.operator else "")

    def status(self) -> str:
        """``running 12.3 s`` or ``pending 4.0 s``."""
        return f"{self.state} {self.age_s:.1f} s"


class Graph:
    """The calls in flight by key and by task id, with the nodes' resources."""

    def __init__(
        self,
        flights: list[Flight],
        nodes: list[dict[str, Any]],
        actors: dict[str, dict[str, Any]],
    ) -> None:
        self.flights = flights
        self.by_key = {f.key: f for f in flights}
        self.by_task: dict[str, Flight] = {}
        for flight in flights:  # a running attempt wins over a pending record of its task
            if flight.task_id and (flight.task_id not in self.by_task or flight.state == "running"):
                self.by_task[flight.task_id] = flight
        self.nodes = [n for n in nodes if n.get("alive")]
        self.actors = actors
        self.on_actor: dict[str, list[Flight]] = {}
        self.creating: dict[str, Flight] = {}  # actor id -> its pending creation
        self.holding: dict[str, list[Flight]] = {}  # resource -> running tasks asking it
        for flight in flights:
            if flight.state == "running" and flight.actor_id:
                self.on_actor.setdefault(flight.actor_id, []).append(flight)
            if flight.state == "pending" and flight.kind == "actor_init" and flight.actor_id:
                self.creating[flight.actor_id] = flight
            if flight.state == "running" and flight.kind == "task" and flight.submission:
                for name, amount in (flight.submission.get("resources") or {}).items():
                    if amount:
                        self.holding.setdefault(name, []).append(flight)
        for holders in self.holding.values():
            holders.sort(key=lambda f: -f.age_s)

    def explain(self) -> None:
        """Fill in each call's ``why``, ``reason`` and ``edges``."""
        for flight in self.flights:
            if flight.state == "running":
                self._running(flight)
            else:
                self._pending(flight)

    def _running(self, flight: Flight) -> None:
        waited = [self.by_task[t] for t in flight.waiting_on if t in self.by_task]
        if flight.waiting_in is None:
            flight.why = doing(flight) + (f" at {flight.where}" if flight.where else "")
            if flight.loop_held_by is not None:
                flight.why += f"; its event loop is held by {flight.loop_held_by.name()}"
            return
        flight.reason = "waiting"
        if flight.waiting_in != "ray.wait" or flight.waiting_refs == 1:
            flight.edges = [w.key for w in waited]
        if not waited:
            flight.why = (
                f"waiting in {flight.waiting_in} on {flight.waiting_refs} ref(s) of calls "
                "that are not in flight here (done, or not debuggable)"
            )
            return
        shown = ", ".join(f"{w.name()} ({w.status()})" for w in waited[:3])
        more = f" and {len(waited) - 3} more" if len(waited) > 3 else ""
        flight.why = f"waiting in {flight.waiting_in} on {shown}{more}"

    def _pending(self, flight: Flight) -> None:
        record = flight.submission or {}
        found = (
            self._infeasible(record)
            or self._actor_missing(flight)
            or self._arguments(record)
            or self._actor_busy(flight)
            or self._resources(record)
        )
        edges: list[str] = []
        for check in (self._actor_missing, self._actor_busy):
            hit = check(flight)
            if hit:
                edges.extend(hit[2])
        args = self._arguments(record)
        if args:
            edges.extend(args[2])
        flight.edges = list(dict.fromkeys(edges))
        if found is None:
            flight.reason = "scheduling"
            flight.why = (
                f"submitted {flight.age_s:.1f} s ago; Ray has not started it yet "
                "(nothing the kit sees holds it back)"
            )
            return
        flight.reason, flight.why = found[0], found[1]

    def _candidates(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        scheduling = record.get("scheduling") or ""
        if scheduling.startswith("node:") and not scheduling.endswith(" soft"):
            wanted = scheduling[5:].split()[0]
            return [n for n in self.nodes if n["node_id"] == wanted]
        return self.nodes

    def _infeasible(self, record: dict[str, Any]) -> tuple[str, str, list[str]] | None:
        asked = record.get("resources") or {}
        if (
            not asked
            or not self.nodes
            or (record.get("scheduling") or "").startswith("placement_group")
        ):
            return None
        candidates = self._candidates(record)
        if any(fits(n["total"], asked) for n in candidates):
            return None
        if not candidates:
            where = f"its node {(record.get('scheduling') or '')[5:17]} is not alive"
            return "infeasible", f"infeasible: asks {fmt_resources(asked)}, and {where}", []
        largest = max(candidates, key=lambda n: room(n["total"], asked))
        have = {k: largest["total"].get(k, 0.0) for k in {*asked, "CPU", "GPU"}}
        return (
            "infeasible",
            f"infeasible: asks {fmt_resources(asked)}; no node has that, the largest "
            f"(node {largest['node_id'][:12]}) has {fmt_resources(have)}",
            [],
        )

    def _actor_missing(self, flight: Flight) -> tuple[str, str, list[str]] | None:
        if flight.kind != "actor_method" or not flight.actor_id:
            return None
        creation = self.creating.get(flight.actor_id)
        if creation is None:
            return None
        return (
            "actor_not_created",
            f"its actor is not created yet: {creation.name()} is pending ({creation.why or '?'})",
            [creation.key],
        )

    def _arguments(self, record: dict[str, Any]) -> tuple[str, str, list[str]] | None:
        waited = [self.by_task[t] for t in record.get("arg_task_ids") or () if t in self.by_task]
        if not waited:
            return None
        shown = ", ".join(f"{w.name()} ({w.status()})" for w in waited[:3])
        return (
            "arguments",
            f"waiting for its arguments, made by {shown}",
            [w.key for w in waited],
        )

    def _actor_busy(self, flight: Flight) -> tuple[str, str, list[str]] | None:
        if flight.kind != "actor_method" or not flight.actor_id:
            return None
        running = self.on_actor.get(flight.actor_id, [])
        if not running:
            return None
        known = self.actors.get(flight.actor_id) or {}
        limit = known.get("max_concurrency")
        if limit is None:
            limit = 1000 if known.get("async") else 1
        if len(running) < limit:
            return None
        oldest = sorted(running, key=lambda f: -f.age_s)
        shown = ", ".join(f"{f.name()} ({f.status()})" for f in oldest[:3])
        return (
            "actor_busy",
            f"queued behind {shown} on actor {flight.actor_id[:12]} (max_concurrency={limit})",
            [f.key for f in oldest],
        )

    def _resources(self, record: dict[str, Any]) -> tuple[str, str, list[str]] | None:
        asked = record.get("resources") or {}
        candidates = self._candidates(record)
        if not asked or not candidates or any(fits(n["available"], asked) for n in candidates):
            return None
        short = sorted(
            name
            for name, amount in asked.items()
            if not any(n["available"].get(name, 0.0) >= amount for n in candidates)
        )
        if not short:  # each is free somewhere, never all on one node
            short = sorted(asked)
        if len(short) == 1:
            holders = self.holding.get(short[0], [])
        else:  # each once, oldest first
            unique = {id(f): f for name in short for f in self.holding.get(name, ())}
            holders = sorted(unique.values(), key=lambda f: -f.age_s)
        if holders:
            shown = ", ".join(f"{f.name()} ({f.status()})" for f in holders[:3])
            more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
            held = f"held by {shown}{more}"
        else:
            held = "held by work the kit does not see (not debuggable)"
        return ("resources", f"waiting for {', '.join(short)}: {held}", [])


def cycles(graph: Graph) -> list[list[Flight]]:
    """Every cycle of the wait-for graph (one per strongly connected group).

    Each starts at the call that has run longest: the one whose wait began the cycle.
    """
    found = []
    for group in _components(graph):
        members = {f.key for f in group}
        start = max(group, key=lambda f: (f.state == "running", f.age_s))
        cycle = _cycle_from(graph, start, members)
        if cycle:
            found.append(cycle)
    return found


def _components(graph: Graph) -> list[list[Flight]]:
    """Tarjan's strongly connected components of size 2 or more, or with a self-loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[Flight]] = []
    counter = 0
    for root in graph.by_key:
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(graph.by_key[root].edges))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            key, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in graph.by_key:
                    continue
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.by_key[target].edges)))
                    advanced = True
                    break
                if target in on_stack:
                    low[key] = min(low[key], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[key])
            if low[key] == index[key]:
                members = _pop_component(graph, key, stack, on_stack)
                if len(members) > 1 or key in graph.by_key[key].edges:
                    result.append(members)
    return result


def _pop_component(graph: Graph, key: str, stack: list[str], on_stack: set[str]) -> list[Flight]:
    members = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        members.append(graph.by_key[member])
        if member == key:
            return members


def _cycle_from(graph: Graph, start: Flight, members: set[str]) -> list[Flight]:
    """One cycle through ``start`` within its component: each call waits on the next."""

    def inside(key: str) -> Iterator[str]:
        return (edge for edge in graph.by_key[key].edges if edge in members)

    path = [start.key]
    visited = {start.key}
    work = [inside(start.key)]
    while work:
        for edge in work[-1]:
            if edge == start.key:
                return [graph.by_key[key] for key in path]
            if edge not in visited:
                visited.add(edge)
                path.append(edge)
                work.append(inside(edge))
                break
        else:
            work.pop()
            path.pop()
    return []


def stragglers(flights: list[Flight], durations: dict[str, list[float]]) -> list[Flight]:
    """Running calls far beyond their function's usual duration: 5x its median and 1 s over.

    Measured against at least 5 finished calls of the function.
    """
    found = []
    for flight in flights:
        sample = durations.get(flight.function) or []
        if flight.state != "running" or len(sample) < 5:
            continue
        median = statistics.median(sample)
        if flight.age_s > 5 * median and flight.age_s - median > 1.0:
            found.append(flight)
    return sorted(found, key=lambda f: -f.age_s)
