"""What a report keeps while it streams over a session's calls: aggregates, not the calls.

:class:`Tally` takes each process's calls once, in the order its files have them, and
hands each call to the folds that keep one concern each (``folds.py``): counts, per-function
durations (8 bytes a call), each call's id by its function (8 bytes a call: ``names.py``),
the largest figures, the state of the findings that need an order (a process's memory
run: ``leaks.py``; an actor's queue), and each process's lane over time for the pictures
(bounded: ``lanes.py``). What it sums are the records of ``sums.py``, which merge: a
cluster's report is the same tally, merged from its nodes' (``merge.py``). Nothing is
read twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from raytrace_kit._reports.run.folds import (
    Busy,
    Functions,
    Ids,
    Lanes,
    Memory,
    Outcomes,
    Queued,
    StuckStatus,
    Timings,
    WaitedOn,
    Window,
)
from raytrace_kit._reports.run.lanes import Lane
from raytrace_kit._reports.run.names import CallNames
from raytrace_kit._reports.run.queues import Queues
from raytrace_kit._reports.run.sums import MAX_LISTED, ActorRun, Function, RunSums

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call
    from raytrace_kit._reports.reading.calls import StartLine
    from raytrace_kit._reports.reading.driver import Waited

__all__ = ["MAX_LISTED", "ActorRun", "Function", "Tally"]


class Tally(RunSums):
    """What a report keeps while it streams over the calls: aggregates, not the calls.

    Per call it keeps one duration (8 bytes, for the percentiles and medians) and its id
    under its function (8 bytes, to name parents); calls with a parent or on an actor add
    their start and end times. Its sums are a :class:`~.sums.RunSums`, and merge as one.
    """

    __slots__ = ("lanes", "names", "queues", "since", "until", "waited")

    def __init__(
        self,
        since: str | None = None,
        until: str | None = None,
        waited: dict[str, Waited | None] | None = None,
        queues: Queues | None = None,
    ) -> None:
        super().__init__()
        self.since, self.until = since, until  # a window of start times (ISO 8601, UTC)
        self.names = CallNames()  # every call's id, by its function
        self.lanes: list[Lane] = []  # what the pictures draw of each process
        # The tasks the driver's long waits named, filled with their calls' ends.
        self.waited = waited
        self.queues = queues or Queues()  # submissions, first starts, stuck (see .queues)

    def _before_window(self, start_line: StartLine | None) -> list[Callable[[Call], None]]:
        """The folds that take every call, whatever the window: ids, waits, queues, stuck."""
        takes: list[Callable[[Call], None]] = [Ids(self.names).take]
        if self.waited is not None:
            takes.append(WaitedOn(self.waited, start_line).take)
        if self.queues.joined:
            takes.append(Queued(self.queues).take)
        takes.append(StuckStatus(self, self.queues).take)  # stuck records come as it reads
        return takes

    def process(self, calls: Iterator[Call], start_line: StartLine | None = None) -> None:
        """Take in one process's calls, in the order its files have them.

        ``start_line`` holds each call's ``call.start`` line as it goes by (``iter_calls``):
        the slowest calls' are kept, for their arguments.
        """
        every = self._before_window(start_line)
        window, outcomes = Window(self, self.since, self.until), Outcomes(self)
        functions, memory, busy = Functions(self, start_line), Memory(), Busy(self)
        timings, lanes = Timings(self), Lanes()
        call = None
        for call in calls:
            for take in every:
                take(call)
            begun = window.take(call)
            if begun is None:
                continue
            status = call.status
            if status == "error":
                outcomes.failure(call)
                lanes.failure(call)
            elif status == "interrupted":
                outcomes.interrupted(call)
                lanes.lane.kill(call)
                window.reach(begun)
                continue
            aggregate = functions.take(call)
            duration = call.duration_s
            if duration is None:
                continue
            memory.take(call, aggregate)
            if call.process_cpu_s:
                busy.take(call, duration)
            ended = call.ended
            if (call.parent_call_id or call.actor_id) and ended and call.mode != "local":
                timings.take(call, ended, duration)
            lanes.take(call, duration)
        window.close(self)
        self.names.pack()
        lane = lanes.close()
        if window.count and call is not None:
            self.calls += window.count
            self.processes += 1
            lane.name(call)
            self.lanes.append(lane)
        memory.close(self, lane)

    def names_of(self, call_ids: list[str]) -> dict[str, str]:
        """The functions of calls, by their ids (an id itself where no such call was read)."""
        found = self.names.names_of(call_ids)
        return {call_id: found.get(call_id, call_id) for call_id in call_ids}
