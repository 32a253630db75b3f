"""Submissions joined to their calls' starts and ends as columns, in numpy.

A report of a run with ``call.submit`` records joins each submission (the submitting
process's file) to its task's first start and last end (the running processes' files),
either read first. :class:`queues.Queues` keeps each side as columns while the report
streams (a task's hash, a stamp's first 26 bytes, a name's number) and joins them here at
the end: a third of a million submissions took a second less, and 30 MB less, than dicts
of tuples (``benchmarks/report.py``, the real shape). numpy comes with Ray; it is imported
only for a session with submissions.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Submitted

__all__ = [
    "Clock",
    "Stamps",
    "column_called",
    "column_loops",
    "decode_submission",
    "first_last_stamps",
    "first_rows",
    "grouped",
    "looked_up",
    "microseconds",
    "read_stamp",
    "reduced",
    "seconds",
]


decode_submission = msgspec.json.Decoder(Submitted).decode


class Clock:
    """ISO 8601 timestamps to seconds, the date and time parsed once per second."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, stamp: str) -> float:
        whole = stamp[:19]
        base = self.seconds.get(whole)
        if base is None:
            base = self.seconds[whole] = datetime.fromisoformat(whole + "+00:00").timestamp()
            if len(self.seconds) > 100_000:
                self.seconds.clear()
        return base + int(microseconds(stamp)) / 1e6


def seconds(stamp: str) -> float:
    """An event's ISO 8601 timestamp as seconds since the epoch."""
    return datetime.fromisoformat(stamp).timestamp()


def microseconds(stamp: str) -> str:
    """A stamp's fraction of a second as six digits: the kit's in place, any other padded.

    The kit writes microseconds; another writer's milliseconds (``.123Z``, ``.123+00:00``)
    or nine digits are read as :func:`read_stamp` reads them, not as six characters.
    """
    if stamp[19:20] != ".":
        return "0"
    digits = stamp[20:26]
    if len(digits) == 6 and digits.isascii() and digits.isdigit():
        return digits
    found = _FRACTION.match(stamp, 19)
    return found[1][:6].ljust(6, "0") if found else "0"


class Stamps:
    """Timestamps kept as their first 26 bytes, read into seconds all at once (numpy).

    :class:`Clock` reads a stamp in half a microsecond; a report of a third of a million calls
    reads a million of them. Here each costs a tenth of that, and 26 bytes until read. A
    stamp of another shape than the kit's (no fraction, milliseconds, ``Z``) is read at once
    by :func:`read_stamp` and kept aside; one that is no time at all is not kept.
    """

    __slots__ = ("data", "odd")

    def __init__(self) -> None:
        self.data = bytearray()
        self.odd: dict[int, float] = {}  # a stamp of another shape: its row, and its time

    def add(self, stamp: str) -> bool:
        """Keep ``stamp`` as the next row; ``False`` (nothing kept) if it is no time."""
        if len(stamp) == _KIT and stamp[19] == "." and stamp[26] in "+-":
            try:  # the kit's own shape: "2026-01-01T00:00:00.000000+00:00"
                self.data += stamp[:_STAMP].encode("ascii")
            except UnicodeEncodeError:
                pass  # a digit of another script: read below
            else:
                return True
        value = read_stamp(stamp)
        if value is None:
            return False
        self.odd[len(self.data) // _STAMP] = value
        self.data += _EPOCH
        return True

    def merge(self, other: Stamps) -> None:
        """Add ``other``'s rows after these (read after them)."""
        rows = len(self.data) // _STAMP
        self.odd.update({rows + row: value for row, value in other.odd.items()})
        self.data += other.data

    def seconds(self, numpy: Any) -> Any:
        """The stamps as floats: the very floats :class:`Clock` gives, in one array."""
        raw = numpy.frombuffer(self.data, dtype=f"S{_STAMP}")
        try:
            micros = raw.astype("datetime64[us]").astype(numpy.int64)
        except ValueError:  # a letter where a digit should be: each row read alone (NaN)
            values = numpy.array(
                [numpy.nan if (v := read_stamp(s.decode())) is None else v for s in raw.tolist()]
            )
        else:  # whole seconds, then the fraction: Clock's two steps, the same float
            values = (micros // 1_000_000).astype(numpy.float64) + (micros % 1_000_000) / 1e6
        for row, value in self.odd.items():
            values[row] = value
        return values


def read_stamp(stamp: str) -> float | None:
    """A time of any ISO 8601 shape, read as :class:`Clock` reads the kit's; ``None`` if none.

    Its date and time of day as UTC (an offset is not applied: the kit writes UTC, and a
    session read two ways would compare times hours apart), plus its fraction, of any
    number of digits.
    """
    try:
        base = datetime.fromisoformat(stamp[:19] + "+00:00").timestamp()
    except ValueError:
        return None
    return base + int(microseconds(stamp)) / 1e6


_FRACTION = re.compile(r"\.([0-9]+)")
_KIT = 32  # the kit's stamps: microseconds, then the UTC offset
_STAMP = 26  # "2026-01-01T00:00:00.000000": the UTC offset after it is always +00:00
_EPOCH = b"1970-01-01T00:00:00.000000"


def first_rows(numpy: Any, keys: Any) -> Any:
    """The rows of each key's first read, in reading order."""
    return numpy.sort(numpy.unique(keys, return_index=True)[1])


def reduced(numpy: Any, found: Any, columns: list[Any], *, last: bool) -> tuple[Any, list[Any]]:
    """Each key (``found``) once, sorted, with its ``columns``' first read values, or latest.

    ``last``: each column's latest value (NaN if any is NaN: it sorts last). Keys
    reduced, then read again with more keys after them, reduce to what all would have:
    two readers' shares reduce apart, and once more where they are merged.
    """
    order = numpy.argsort(found, kind="stable")
    found = found[order]
    if not len(found):
        return found, [column[order] for column in columns]
    starts = numpy.flatnonzero(numpy.append(True, found[1:] != found[:-1]))
    if last:
        return found[starts], [numpy.maximum.reduceat(c[order], starts) for c in columns]
    return found[starts], [column[order][starts] for column in columns]


def looked_up(numpy: Any, keys: Any, found: Any, values: Any) -> Any:
    """Each of ``keys``' value among the sorted ``found`` keys' ``values``; NaN if none."""
    if not len(found):
        return numpy.full(len(keys), numpy.nan)
    at = numpy.searchsorted(found, keys).clip(max=len(found) - 1)
    return numpy.where(found[at] == keys, values[at], numpy.nan)


def grouped(numpy: Any, groups: Any, values: Any) -> dict[int, list[float]]:
    """``values`` by their group's number, each group's sorted; groups in the order they come."""
    if not len(groups):
        return {}
    numbers, firsts = numpy.unique(groups, return_index=True)
    order = numpy.lexsort((values, groups))  # by group, then by value
    bounds = numpy.searchsorted(groups[order], numbers)  # where each group's rows begin
    parts = dict(zip(numbers.tolist(), numpy.split(values[order], bounds[1:]), strict=True))
    return {number: parts[number].tolist() for number in numbers[numpy.argsort(firsts)].tolist()}


def column_called(
    numpy: Any, site: Any, function: Any, names: list[str]
) -> dict[str, dict[str, int]]:
    """Each line's calls by function, of columns: the driver's calls' line and function numbers.

    ``names`` are what the numbers stand for; lines and functions in the order of the numbers.
    """
    if not len(site):
        return {}
    width = len(names)
    pairs, counts = numpy.unique(site * width + function, return_counts=True)
    found: dict[str, dict[str, int]] = {}
    for pair, calls in zip(pairs.tolist(), counts.tolist(), strict=True):
        line, number = divmod(pair, width)
        found.setdefault(names[line], {})[names[number]] = calls
    return found


def column_loops(  # noqa: PLR0917 -- the columns, their names, and the least a loop is
    numpy: Any, site: Any, when: Any, ended: Any, names: list[str], least: int
) -> list[dict[str, Any]]:
    """``flights.loops_of`` of columns: each driver's call's line, submission, task's end or NaN.

    ``least``: the fewest calls of a line that make a loop.
    """
    if not len(site):
        return []
    firsts = numpy.unique(site, return_index=True)
    in_order = firsts[0][numpy.argsort(firsts[1])].tolist()  # as the lines were first read
    missing = numpy.isnan(ended)
    order = numpy.lexsort((numpy.where(missing, -1.0, ended), when, site))  # as loops_of sorts
    site, when, ended, missing = site[order], when[order], ended[order], missing[order]
    serial = (site[:-1] == site[1:]) & ~missing[:-1] & (ended[:-1] <= when[1:])
    serials = numpy.bincount(site[:-1][serial], minlength=len(names)).tolist()
    counts = numpy.bincount(site, minlength=len(names)).tolist()
    found = [
        {"site": names[line], "calls": counts[line], "serial": serials[line]}
        for line in in_order
        if counts[line] >= least
        and serials[line] >= least - 1
        and 2 * serials[line] >= counts[line]
    ]
    found.sort(key=lambda row: -row["serial"])
    return found


class _Stamped(msgspec.Struct):
    timestamp: str = ""


_STAMPED = msgspec.json.Decoder(_Stamped).decode


def first_last_stamps(file: Path) -> list[str]:
    """The timestamps of a file's first and last lines, as written, without their offset.

    The kit's lines start with theirs (UTC); a line in another shape is decoded for it.
    """
    try:
        with file.open("rb") as handle:
            first = handle.readline()
            handle.seek(0, 2)
            handle.seek(max(handle.tell() - 4096, 0))
            last = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    except OSError:
        return []
    stamps = []
    for line in (first, last):
        if line.startswith(b'{"timestamp":"') and line[40:41] == b"+":  # the kit's stamp
            stamps.append(line[14:40].decode("ascii", "replace").replace("T", " "))
            continue
        try:
            stamp = _STAMPED(line).timestamp
        except msgspec.DecodeError:
            continue
        bare = _BARE.match(stamp)  # another writer's: milliseconds, Z, a space
        if bare:
            stamps.append(bare[0].replace("T", " "))
    return stamps


_BARE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,6})?")  # no offset, no Z
