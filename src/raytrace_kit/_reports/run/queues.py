"""What the in-flight records add to a report: time in queue, calls never started, stuck calls.

A ``call.submit`` (written by the submitting process) and the ``call.start`` of the same
task (written by the process that ran it) give the call's time in queue; a submission
with no start by the end of the records is a call that never started; a ``call.stuck``
says where a call was when it ran past its ``stuck_after``, which stays known after the
job or the worker is killed. Kept while the report streams: per submission and per first
start, one hash and one float (the join waits for the end, since either side may be read
first); the last stuck event of each call.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import msgspec

from raytrace_kit._output.schema import Stuck
from raytrace_kit._reports.reading.columns import (
    Clock,
    Stamps,
    column_called,
    column_loops,
    decode_submission,
    grouped,
    looked_up,
)
from raytrace_kit._reports.reading.counts import has_submissions
from raytrace_kit._reports.run.by_value import ByValue
from raytrace_kit._reports.run.flights import LOOP_MIN, behind, flights
from raytrace_kit._reports.run.queue_columns import Packed

__all__ = [
    "MAX_LISTED",
    "Queues",
    "has_arg_refs",
    "has_submissions",
]

MAX_LISTED = 1000  # calls never started, stuck calls: enough to act on
KEEP_TASK_IDS = 4 * MAX_LISTED  # submissions whose task id a report keeps (the first read)
_STUCK = msgspec.json.Decoder(Stuck).decode


class _Cancel(msgspec.Struct, gc=False):
    task_id: str | None = None
    force: bool = False


_CANCEL = msgspec.json.Decoder(_Cancel).decode


class _Made(msgspec.Struct, gc=False):
    """What an actor's creation record says of how it runs its calls."""

    actor_id: str | None = None
    max_concurrency: int | None = None
    is_async: bool | None = msgspec.field(default=None, name="async")


_MADE = msgspec.json.Decoder(_Made).decode
BUSY_GAP_S = 0.1  # an actor idle longer than this between two calls: a new busy stretch


_ARG_REFS = b'"arg_task_ids":["'


def has_arg_refs(raw: bytes) -> bool:
    """Whether a ``call.submit`` names calls that make its argument refs (a byte search)."""
    return _ARG_REFS in raw


class Queues:
    """Submissions, first starts and last ends by task, and the last stuck event of each call.

    ``joined``: whether first starts are kept (only when the files hold submissions: a run
    without them costs nothing more per call). Kept as columns (a task's hash, a stamp's
    bytes, a name's number), joined in :meth:`results` with numpy: a third of a million
    submissions cost 30 MB and a second less than dicts of tuples.
    """

    def __init__(
        self, *, joined: bool = True, since: str | None = None, until: str | None = None
    ) -> None:
        self.joined = joined
        self.since, self.until = since, until  # the report's window, on submission times
        self.clock = Clock()
        self._new_columns()
        self.first_task_ids: dict[str, None] = {}  # the first tasks' ids (a report lists a few)
        self.names: dict[str, int] = {}  # each function, site, actor, numbered once
        self.stuck: dict[str, Stuck] = {}
        self.shared: dict[str, str] = {}  # each function, site, actor's one copy (joins)
        self.killed: set[str] = set()  # tasks ray.cancel(force=True) ended: their workers
        self.ready: dict[str, list[float]] = {}  # actor -> the ends of its __init__ calls
        self.actor_last: dict[str, float] = {}  # actor -> its last call's end, as read
        # Method task -> its actor's last end at its start, and since when it was busy then.
        self.before: dict[int, tuple[float, float]] = {}
        self.busy_since: dict[str, float] = {}  # actor -> its current busy stretch's start
        self.made: dict[str, dict[str, Any]] = {}  # actor -> async, max_concurrency (made)
        self.by_value = ByValue()  # large arguments and functions (see .by_value)
        self.packed: Packed | None = None  # the columns above as arrays (see pack())

    def line(self, raw: bytes) -> None:
        """Take one ``call.submit`` or ``call.stuck`` line (``iter_calls``' others)."""
        try:
            if raw.find(b'"event":"call.submit"', 0, 120) >= 0:
                record = decode_submission(raw)
                stamp = record.timestamp
                if (self.since is not None and stamp < self.since) or (
                    self.until is not None and stamp >= self.until
                ):
                    return
                if record.large_args or record.code_bytes:
                    self.by_value.take(record, raw)
                if record.kind == "actor_init":
                    self.take_made(raw)
                task = record.task_id
                if task and stamp and self.submit_stamps.add(stamp):
                    if len(self.first_task_ids) < KEEP_TASK_IDS:  # the first tasks read
                        self.first_task_ids.setdefault(task)
                    self.submit_keys.append(hash(task))
                    names, number = self.names, self._number
                    site = record.site
                    self.submit_names.extend(
                        (
                            names.get(record.function) or number(record.function),
                            names.get(site) or number(site) if site else -1,
                            number(record.actor_id)
                            if record.kind == "actor_method" and record.actor_id
                            else -1,
                        )
                    )
                    self.by_driver.append(record.parent_call_id is None)
                    self.with_args.append(has_arg_refs(raw))
            elif raw.find(b'"event":"call.stuck"', 0, 120) >= 0:
                event = _STUCK(raw)
                if event.call_id in self.stuck or len(self.stuck) < MAX_LISTED:
                    self.stuck[event.call_id] = event
            elif raw.find(b'"event":"call.cancel"', 0, 120) >= 0:
                cancel = _CANCEL(raw)
                if cancel.force and cancel.task_id and len(self.killed) < MAX_LISTED:
                    self.killed.add(cancel.task_id)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # a line cut short by a killed process

    def merge(self, other: Queues) -> None:
        """Add ``other``'s records (read after these): columns appended, names renumbered."""
        import numpy  # noqa: PLC0415 -- only for a session read in shares (150 ms)

        ours = numpy.array([*(self._number(name) for name in other.names), -1], dtype=numpy.int64)
        mine, theirs = self.pack(), other.pack()
        self.packed = mine.then(numpy, theirs, ours)
        for task in other.first_task_ids:
            if len(self.first_task_ids) < KEEP_TASK_IDS:
                self.first_task_ids.setdefault(task)
        for call_id, event in other.stuck.items():
            if call_id in self.stuck or len(self.stuck) < MAX_LISTED:
                self.stuck[call_id] = event
        self.killed |= set(sorted(other.killed)[: max(MAX_LISTED - len(self.killed), 0)])
        for actor, ends in other.ready.items():
            self.ready.setdefault(actor, []).extend(ends)
        for key, before in other.before.items():
            self.before.setdefault(key, before)
        self.actor_last.update(other.actor_last)
        self.busy_since.update(other.busy_since)
        self.made.update(other.made)
        self.by_value.merge(other.by_value)

    def take_made(self, raw: bytes) -> None:
        """An actor's creation record: whether its methods are async, how many run at once."""
        try:
            made = _MADE(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # another writer's record, of other types: how it runs is not known
        if made.actor_id:
            self.made[made.actor_id] = {
                "async": made.is_async,
                "max_concurrency": made.max_concurrency,
            }

    def _number(self, name: str) -> int:
        """A name's number (the first name is 0: ``names.get(...) or`` lands here for it)."""
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = len(self.names)
        return found

    def start(
        self,
        task_id: str,
        begun: str,
        ended: str | None,
        attempt: int | None,
        idle_from: str | None = None,
    ) -> None:
        """A call's first attempt's start (the queue ends there), and its task's last end.

        ``idle_from``: the end of the call its process ran before it (``None`` for its
        first: the process was starting): from then until this call's start, the worker
        that ran it sat idle.
        """
        key = hash(task_id)
        if not attempt and begun and self.start_stamps.add(begun):
            self.start_keys.append(key)
            if not (idle_from and self.start_idle.add(idle_from)):
                self.start_idle.add(begun)  # its process's first call: no idle time
        if ended and self.end_stamps.add(ended):
            self.end_keys.append(key)

    def actor_call(  # noqa: PLR0917 -- a call's fields, on the report's hot path
        self,
        actor_id: str,
        task_id: str,
        kind: str | None,
        attempt: int | None,
        begun: str,
        ended: str | None,
    ) -> None:
        """A call of an actor, in the order its process ran them (see :func:`behind`).

        Kept for each method call: the actor's last end when it started, and the start of
        the stretch the actor had been busy for then (calls with gaps under
        :data:`BUSY_GAP_S`): a call waited behind the others only while they ran.
        """
        last = self.actor_last
        known = last.get(actor_id)
        if kind == "actor_method" and not attempt and known is not None:
            since = self.busy_since.get(actor_id, known)
            self.before.setdefault(self._key(task_id), (known, since))
        if begun:
            start = self._time(begun)
            if known is None or start - known > BUSY_GAP_S * self._PER_SECOND:
                self.busy_since[actor_id] = start  # it was idle: a new busy stretch
        if ended:
            when = last[actor_id] = self._time(ended)
            if kind == "actor_init":
                self.ready.setdefault(actor_id, []).append(when)

    _PER_SECOND = 1.0  # a second in these tables' unit (see _time)

    def _key(self, task_id: str) -> int:
        """A task's key in these tables (:class:`joins.NodeQueues`: alike in every process)."""
        return hash(task_id)

    def _time(self, stamp: str) -> float:
        """A stamp in these tables' unit: seconds (:class:`joins.NodeQueues`: microseconds)."""
        return self.clock(stamp)

    def pack(self) -> Packed:
        """The columns as arrays, each task's rows reduced (:class:`Packed`), kept as such.

        A reader of a share packs its own, on its core, before its share is merged.
        """
        if self.packed is not None and not (self.submit_keys or self.start_keys or self.end_keys):
            return self.packed  # nothing read since
        import numpy  # noqa: PLC0415 -- only for a session with submissions (150 ms)

        packed = Packed.of(numpy, self)
        if self.packed is not None:  # packed before: those rows came first, numbered alike
            same = numpy.append(numpy.arange(len(self.names), dtype=numpy.int64), -1)
            packed = self.packed.then(numpy, packed, same)
        self.packed = packed
        self._new_columns()  # what is read from now on: packed after these
        return packed

    def _new_columns(self) -> None:
        """Empty columns, for the rows read from now on."""
        # Submissions, one row each, in reading order: the task, when, the names' numbers
        # (function, site, actor: -1 for none), whether the driver submitted it.
        self.submit_keys = array("q")
        self.submit_stamps = Stamps()
        self.submit_names = array("q")  # three per row
        self.by_driver = bytearray()
        self.with_args = bytearray()  # whether its arguments include refs (has_arg_refs)
        self.start_keys = array("q")  # each task's first attempt's start(s)
        self.start_stamps = Stamps()
        self.start_idle = Stamps()  # ...and since when its process idled (its last end)
        self.end_keys = array("q")  # every attempt's end: a task's last, for a loop's calls
        self.end_stamps = Stamps()

    def results(self, ended: Callable[[str], str | None]) -> dict[str, Any]:
        """Time in queue per function, calls never started, stuck calls (for the report).

        ``ended`` gives a call's status by its id (``None`` if it never ended).
        """
        if not self.submit_keys and (self.packed is None or not len(self.packed.submit)):
            return flights({}, [], 0, self.stuck.values(), ended, [], {}, made=self.made)
        import numpy  # noqa: PLC0415 -- only for a session with submissions (150 ms)

        packed = self.pack()  # each task's first submission, first start, last end
        keys, when, driver = packed.submit, packed.when, packed.driver
        function, site, actor = packed.names[:, 0], packed.names[:, 1], packed.names[:, 2]
        begun = looked_up(numpy, keys, packed.starts, packed.begun)
        idle = looked_up(numpy, keys, packed.starts, packed.idle)  # begun's
        ends = looked_up(numpy, keys, packed.ends, packed.ended)
        names = list(self.names)
        started = ~numpy.isnan(begun)
        # Time in queue: each function's, in the order the functions were first started.
        waiting = numpy.where(begun > when, begun - when, 0.0)
        waits = _named(names, grouped(numpy, function[started], waiting[started]))
        # Time in queue while the worker that ran the call idled (from its last call's end,
        # or the submission, to the start): the wait no call ahead explains, no start-up
        # either. Not an actor's (its queue is the serializing rule's, behind its calls
        # while they ran), nor one whose arguments were refs (it waited for those first).
        counted = started & (actor < 0) & ~packed.inputs
        since = numpy.maximum(when, idle)
        idled = numpy.where(begun > since, begun - since, 0.0)
        backlog = _named(names, grouped(numpy, function[counted], idled[counted]))
        ids = list(self.first_task_ids)  # the n-th is the n-th row's: both first reads
        never = [
            {
                "function": names[function[row]],
                "submitted": float(when[row]),
                "site": names[site[row]] if site[row] >= 0 else None,
                "task_id": ids[row] if row < len(ids) else None,
            }
            for row in numpy.flatnonzero(~started)[:MAX_LISTED].tolist()
        ]
        lined = driver & (site >= 0)
        loops = column_loops(numpy, site[lined], when[lined], ends[lined], names, LOOP_MIN)
        called = column_called(numpy, site[lined], function[lined], names)
        of_actors = numpy.flatnonzero(started & (actor >= 0)).tolist()
        longest = self._behind_actors(
            of_actors, [names[n] for n in actor[of_actors].tolist()], keys, when, begun
        )
        return flights(
            waits,
            never,
            int((~started).sum()),
            self.stuck.values(),
            ended,
            loops,
            longest,
            called=called,
            made=self.made,
            backlog=backlog,
        )

    def _behind_actors(
        self, rows: list[int], actors: list[str], keys: Any, when: Any, begun: Any
    ) -> dict[str, tuple[int, float]]:
        """Each actor's started calls' count, and the longest one waited behind the others.

        ``rows``: the submissions of actor methods that started, ``actors`` their actors'.
        """
        waited: dict[str, list[float]] = {}
        for row, name in zip(rows, actors, strict=True):
            waited.setdefault(name, []).append(
                behind(
                    float(when[row]),
                    float(begun[row]),
                    self.before.get(int(keys[row])),
                    self.ready.get(name),
                )
            )
        return {name: (len(values), max(values)) for name, values in waited.items()}


def _named(names: list[str], groups: dict[int, Any]) -> dict[str, Any]:
    """Values grouped by a name's number, keyed by the name itself."""
    return {names[number]: values for number, values in groups.items()}
