"""The queues' columns as numpy arrays, each task's rows reduced: what their join reads.

:class:`~raytrace_kit._reports.run.queues.Queues` keeps submissions, first starts and last
ends as raw columns while the report streams; :meth:`Packed.of` turns them into arrays and
keeps of each task its first submission, its first start (with since when its worker
idled) and its latest end. Reduced columns, read again after another share's, reduce to
what all the rows would have: each reader of a large session packs its own share on its
own core, and the merged report reduces once more (two sorted runs: a merge, not a sort).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.reading.columns import first_rows, reduced

if TYPE_CHECKING:
    from raytrace_kit._reports.run.queues import Queues

__all__ = ["Packed"]


class Packed:
    """Submissions, first starts and last ends, as arrays, reduced as they are made.

    Submissions: the task, when, its name numbers, by the driver, with ref arguments; first
    starts: the task, when, since when its worker idled; last ends: the task, when.
    """

    __slots__ = (
        "begun",
        "driver",
        "ended",
        "ends",
        "idle",
        "inputs",
        "names",
        "starts",
        "submit",
        "when",
    )

    def __init__(self, numpy: Any, columns: tuple[Any, ...]) -> None:
        (self.submit, self.when, self.names, self.driver, self.inputs) = columns[:5]
        (self.starts, self.begun, self.idle, self.ends, self.ended) = columns[5:]
        rows = first_rows(numpy, self.submit)  # a task's first submission, in reading order
        self.submit, self.when, self.names = self.submit[rows], self.when[rows], self.names[rows]
        self.driver, self.inputs = self.driver[rows], self.inputs[rows]
        self.starts, (self.begun, self.idle) = reduced(
            numpy, self.starts, [self.begun, self.idle], last=False
        )
        self.ends, (self.ended,) = reduced(numpy, self.ends, [self.ended], last=True)

    @classmethod
    def of(cls, numpy: Any, queues: Queues) -> Packed:
        """``queues``' raw columns, packed (and reduced)."""
        as_bools = numpy.uint8
        columns = (
            numpy.frombuffer(queues.submit_keys, dtype=numpy.int64),
            queues.submit_stamps.seconds(numpy),
            numpy.frombuffer(queues.submit_names, dtype=numpy.int64).reshape(-1, 3),
            numpy.frombuffer(queues.by_driver, dtype=as_bools).astype(bool),
            numpy.frombuffer(queues.with_args, dtype=as_bools).astype(bool),
            numpy.frombuffer(queues.start_keys, dtype=numpy.int64),
            queues.start_stamps.seconds(numpy),
            queues.start_idle.seconds(numpy),
            numpy.frombuffer(queues.end_keys, dtype=numpy.int64),
            queues.end_stamps.seconds(numpy),
        )
        return cls(numpy, columns)

    def then(self, numpy: Any, other: Packed, renumber: Any) -> Packed:
        """These rows, then ``other``'s (its name numbers through ``renumber``), reduced."""
        columns = (
            numpy.concatenate([self.submit, other.submit]),
            numpy.concatenate([self.when, other.when]),
            numpy.concatenate([self.names, renumber[other.names]]),  # -1 (none) stays -1
            numpy.concatenate([self.driver, other.driver]),
            numpy.concatenate([self.inputs, other.inputs]),
            numpy.concatenate([self.starts, other.starts]),
            numpy.concatenate([self.begun, other.begun]),
            numpy.concatenate([self.idle, other.idle]),
            numpy.concatenate([self.ends, other.ends]),
            numpy.concatenate([self.ended, other.ended]),
        )
        return Packed(numpy, columns)
