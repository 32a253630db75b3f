"""Times as whole microseconds, as they travel between nodes, and what is measured in them.

A cluster's report joins records read on different nodes: their stamps travel as whole
microseconds since the epoch (:func:`micros`) and become, where they meet, the very floats
:class:`~raytrace_kit._reports.reading.columns.Clock` makes of the same stamps in one pass
(:func:`from_micros`), so the merged report and the one-pass report agree to the last
digit. Here too: the driver's calls by line, packed (:class:`Lines`), and a call's waits
(behind an actor's calls, while its worker idled) of such times.
"""

from __future__ import annotations

from raytrace_kit._reports.reading.columns import Clock, microseconds
from raytrace_kit._reports.run.packing import pack_ints, unpack_ints

__all__ = ["NONE", "Lines", "behind_micros", "from_micros", "idled_s", "micros", "unpack_lines"]

NONE = -1  # no such time (a task with no end)


def micros(stamp: str, clock: Clock | None = None) -> int:
    """A stamp as whole microseconds since the epoch, read as :class:`columns.Clock` reads it."""
    base = int((clock or Clock())(stamp[:19]))  # its whole second (parsed once a second)
    return base * 1_000_000 + int(microseconds(stamp))


def from_micros(value: int) -> float:
    """The very float :class:`columns.Clock` gives for the stamp of :func:`micros`."""
    return float(value // 1_000_000) + (value % 1_000_000) / 1e6


class Lines:
    """The driver's calls by the line that submitted them: submitted, the task's last end."""

    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[int, int]]] = {}

    def add(self, site: str, submitted: int, ended: int | None) -> None:
        self.calls.setdefault(site, []).append((submitted, NONE if ended is None else ended))

    def unpacked(self, site: str) -> list[tuple[float, float | None]]:
        """A line's calls as ``flights.loops_of`` reads them."""
        return [
            (from_micros(when), None if end == NONE else from_micros(end))
            for when, end in self.calls.get(site, [])
        ]

    def packed(self, site: str) -> tuple[bytes, bytes]:
        """A line's calls, packed (sorted by submission; each end after it)."""
        calls = sorted(self.calls.get(site, []))
        ends = [end - when if end != NONE else NONE for when, end in calls]
        return pack_ints([when for when, _ in calls]), pack_ints(ends)


def unpack_lines(packed: tuple[bytes, bytes]) -> list[tuple[float, float | None]]:
    """A line's calls as ``queues`` keeps them: (submitted, the task's last end or None)."""
    whens, ends = unpack_ints(packed[0]), unpack_ints(packed[1])
    return [
        (from_micros(when), None if end == NONE else from_micros(when + end))
        for when, end in zip(whens, ends, strict=True)
    ]


def behind_micros(
    submitted: int,
    begun: int,
    before: tuple[float, float] | None,
    ready: list[float] | None,
) -> float:
    """:func:`flights.behind` of whole microseconds, as the same floats it is given there."""
    if before is None:
        return 0.0
    created = int(max((end for end in ready or () if end <= begun), default=0))
    since = max(submitted, created, int(before[1]))
    until = min(begun, int(before[0]))
    return max(from_micros(until) - from_micros(since), 0.0)


def idled_s(submitted: int, begun: int, idle_from: int) -> float:
    """A call's time in queue while its worker idled (see ``Queues.results``), in seconds."""
    return max(from_micros(begun) - from_micros(max(submitted, idle_from)), 0.0)
