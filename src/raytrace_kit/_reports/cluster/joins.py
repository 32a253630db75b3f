"""Submissions joined to their calls' starts and ends across nodes, without one place for all.

A call's ``call.submit`` is written where it was submitted, its ``call.start`` and
``call.end`` where it ran (a retry perhaps on a third node): a report's time in queue,
its calls never started, its actors' queues and the driver's ``ray.get`` loops (each
driver call's submission against its task's last end) need both. On each node
:class:`NodeQueues` joins what it holds both halves of; the rest is split by task key
into as many parts as there are nodes (:meth:`NodeQueues.split`), part ``j`` goes to node
``j`` (through Ray's object store: node to node, the caller passes only references), and
each node joins its part (``parts.join``). The caller gets, per node, each function's waits
packed (about a byte each), the first calls never started, each actor's longest wait and
the driver's calls by line: what a report of all the files computes, with the same
floats (times travel as whole microseconds and become the floats ``columns.Clock`` makes).
"""

from __future__ import annotations

from typing import Any

import msgspec

from raytrace_kit._reports.cluster.parts import Record, pack_part, packed_waits
from raytrace_kit._reports.cluster.times import (
    NONE,
    Lines,
    behind_micros,
    from_micros,
    idled_s,
    micros,
)
from raytrace_kit._reports.reading.columns import decode_submission
from raytrace_kit._reports.run.flights import loops_of
from raytrace_kit._reports.run.packing import task_key, unpack_ints
from raytrace_kit._reports.run.queues import KEEP_TASK_IDS, Queues, has_arg_refs

__all__ = ["KEEP_TASK_IDS", "NodeQueues"]


class NodeQueues(Queues):
    """:class:`Queues` keyed alike in every process, with times as whole microseconds."""

    def __init__(self, *, joined: bool, since: str | None, until: str | None) -> None:
        super().__init__(joined=joined, since=since, until=until)
        self.records: dict[int, Record] = {}
        self.first_starts: dict[int, int] = {}  # task -> its first attempt's start
        self.first_idle: dict[int, int] = {}  # ...and since when its process idled then
        self.last_ends: dict[int, int] = {}  # task -> its last end, of any attempt here
        self.retried: set[int] = set()  # tasks with a later attempt here
        self.joined_here: set[int] = set()
        self.deferred: list[tuple[int, Record, int | None]] = []  # see here()
        self.lines = Lines()  # the driver's calls read here, with their tasks' last ends
        self.waiting: dict[int, tuple[str, int]] = {}  # index -> (site, submitted): end due

    def line(self, raw: bytes) -> None:
        if raw.find(b'"event":"call.submit"', 0, 120) < 0:
            super().line(raw)
            return
        try:
            record = decode_submission(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # a line cut short by a killed process
        stamp = record.timestamp
        if (self.since is not None and stamp < self.since) or (
            self.until is not None and stamp >= self.until
        ):
            return
        if record.large_args or record.code_bytes:
            self.by_value.take(record, raw)
        if record.kind == "actor_init":
            self.take_made(raw)
        if record.task_id and stamp:
            key = task_key(record.task_id)
            if key not in self.records:
                index = len(self.records)
                shared = self.shared  # one copy of each function, site, actor (see Queues)
                actor = record.actor_id if record.kind == "actor_method" else None
                self.records[key] = (
                    micros(stamp, self.clock),
                    shared.setdefault(record.function, record.function),
                    record.site and shared.setdefault(record.site, record.site),
                    record.task_id if index < KEEP_TASK_IDS else None,
                    index,
                    actor and shared.setdefault(actor, actor),
                    record.parent_call_id is None,
                    has_arg_refs(raw),
                )

    _PER_SECOND = 1_000_000.0

    def _key(self, task_id: str) -> int:
        return task_key(task_id)

    def _time(self, stamp: str) -> float:
        return micros(stamp, self.clock)

    def start(
        self,
        task_id: str,
        begun: str,
        ended: str | None,
        attempt: int | None,
        idle_from: str | None = None,
    ) -> None:
        key = task_key(task_id)
        if attempt:
            self.retried.add(key)
        elif begun and key not in self.first_starts:
            self.first_starts[key] = micros(begun, self.clock)
            self.first_idle[key] = micros(idle_from or begun, self.clock)
        if ended:
            when = micros(ended, self.clock)
            if when > self.last_ends.get(key, NONE):
                self.last_ends[key] = when

    def here(self, failed: set[int]) -> dict[str, Any]:
        """What joins here: each function's waits (packed), its first joined submission...

        ...each actor's waits' count and longest, and the driver's calls by line whose task
        ended here for good (its one attempt ran here and did not fail: ``failed`` are the
        keys of tasks with a failed attempt here). A driver's call whose task may have run
        again elsewhere waits for :meth:`split`, with the other halves.
        """
        waits: dict[str, list[float]] = {}
        idled: dict[str, list[float]] = {}  # in queue while the worker that ran it idled
        first: dict[str, int] = {}
        actors: list[tuple[str, float]] = []
        lines = self.lines
        left: dict[int, Record] = {}
        starts, ends, idle = self.first_starts, self.last_ends, self.first_idle
        sites: dict[str, int] = {}  # the driver's lines: each one's first submission here
        called: dict[str, dict[str, int]] = {}  # the driver's lines: their calls by function
        for key, row in self.records.items():
            if row[6] and row[2]:
                sites.setdefault(row[2], row[4])
                functions = called.setdefault(row[2], {})
                functions[row[1]] = functions.get(row[1], 0) + 1
            begun = starts.get(key)
            if begun is None:
                left[key] = row
                continue
            when, function, site, _, index, actor, by_driver, with_args = row
            waited = max(from_micros(begun) - from_micros(when), 0.0)
            if function not in waits:
                waits[function], first[function] = [], index
            waits[function].append(waited)
            if not actor and not with_args:  # see Queues.results
                idled.setdefault(function, []).append(idled_s(when, begun, idle.get(key, begun)))
            if actor:
                actors.append(
                    (actor, behind_micros(when, begun, self.before.get(key), self.ready.get(actor)))
                )
            if by_driver and site:
                ended = ends.get(key)
                if ended is None or key in failed or key in self.retried:
                    self.deferred.append((key, row, ended))
                    self.waiting[index] = (site, when)
                else:
                    lines.add(site, when, ended)
        self.joined_here = set(self.records) - set(left)
        self.records = left
        for when, _, site, _, index, _, by_driver, _ in left.values():
            if by_driver and site:  # its end (if any) is wherever it ran: sent back here
                self.waiting[index] = (site, when)
        return {
            "count": len(self.records) + len(self.joined_here),
            **packed_waits(waits, idled, first, actors),
            "sites": sites,
            "called": called,
            "stuck": list(self.stuck.values()),
            "killed": sorted(self.killed),  # force-cancelled tasks: their calls' cause
            "made": self.made,  # the actors created here: async, max_concurrency
            "by_value": self.by_value.summary(),  # large arguments and functions
        }

    def ends(self, answers: list[tuple[bytes, bytes]], shared: list[str]) -> dict[str, Any]:
        """The driver's lines read here, with the ends the nodes sent back (see ``parts.join``).

        Returns each line's loop (``flights.loops_of``: a line whose calls were each
        submitted after the one before ended), and for ``shared`` lines (submitted from
        several nodes) its calls, packed, for the caller to judge whole.
        """
        lines = self.lines
        for indexes, ends in answers:
            for index, end in zip(unpack_ints(indexes), unpack_ints(ends), strict=True):
                site, when = self.waiting[index]
                lines.add(site, when, None if end == NONE else end)
        mine = [site for site in lines.calls if site not in shared]
        return {
            "loops": loops_of({site: lines.unpacked(site) for site in mine}),
            "shared": {site: lines.packed(site) for site in shared if site in lines.calls},
        }

    def task_ids(self, indexes: list[int]) -> dict[int, str]:
        """The task ids of the submissions read ``indexes``-th here (among those kept)."""
        wanted = set(indexes)
        return {row[4]: row[3] for row in self.records.values() if row[4] in wanted and row[3]}

    def split(self, offset: int, parts: int) -> list[dict[str, Any]]:
        """What did not join here, in ``parts`` parts by task key; part ``j`` for node ``j``.

        ``offset`` is how many submissions the nodes before this one read (the order of
        reading decides which task ids a report keeps, and which calls it lists first).
        """
        rows: list[list[tuple[int, Record]]] = [[] for _ in range(parts)]
        for key, row in self.records.items():
            rows[key % parts].append((key, row))
        deferred: list[list[tuple[int, Record, int | None]]] = [[] for _ in range(parts)]
        for item in self.deferred:
            deferred[item[0] % parts].append(item)
        halves: list[list[tuple[int, int, int, int]]] = [[] for _ in range(parts)]
        for key in dict.fromkeys([*self.first_starts, *self.last_ends]):
            if key not in self.joined_here:  # submitted elsewhere, or retried here
                start = self.first_starts.get(key, NONE)
                idle = self.first_idle.get(key, start)
                halves[key % parts].append((key, start, self.last_ends.get(key, NONE), idle))
        before: list[list[tuple[int, int, int]]] = [[] for _ in range(parts)]
        for key, (end, since) in self.before.items():
            if key not in self.joined_here:
                before[key % parts].append((key, int(end), int(since)))
        return [
            pack_part(offset, rows[j], deferred[j], halves[j], (self.ready, before[j]))
            for j in range(parts)
        ]
