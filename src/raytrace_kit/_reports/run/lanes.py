"""What the report's pictures keep of each process while it streams: a bounded lane.

A :class:`Lane` is one process's calls over time in at most ``2 * POINTS`` points. Each
point sums the calls that ended since the point before it: how many, the seconds they
ran, how many failed, and the highest RSS at their ends. While a process has made few
calls a point is one call; each time the points fill up, neighbours merge in pairs and
from then on a point sums twice as many calls. Only the calls that close a point have
their timestamp parsed, so a million calls cost a few additions each (the sums are kept
in the report's own loop, ``tally.py``). Failures and calls without an end are kept as
marks, at most ``2 * MARKS`` of each, spread the same way.
"""

from __future__ import annotations

import sys
from array import array
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.reading.columns import seconds
from raytrace_kit._reports.run.packing import pack_floats, pack_ints, unpack_floats, unpack_ints

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call

__all__ = ["LANES_DRAWN", "MARKS", "POINTS", "Lane", "lanes_data"]

POINTS = 256  # a lane keeps from POINTS to 2 * POINTS points: enough for 700 pixels
MARKS = 32  # failures and calls without an end marked per lane, at most twice this many
LANES_DRAWN = 24  # lanes a picture draws: beyond that, lanes are too thin to read


class _Marks:
    """Every ``stride``-th of a kind of call (time, function, detail): a bounded sample."""

    __slots__ = ("count", "kept", "stride")

    def __init__(self) -> None:
        self.count = 0
        self.stride = 1
        self.kept: list[tuple[float, str, str]] = []

    def add(self, stamp: str, function: str, detail: str) -> None:
        self.count += 1
        if (self.count - 1) % self.stride or not stamp:
            return
        self.kept.append((seconds(stamp), sys.intern(function), sys.intern(detail)))
        if len(self.kept) >= 2 * MARKS:  # what stays is still every stride-th
            del self.kept[1::2]
            self.stride *= 2


class Lane:
    """One process's calls over time, as at most ``2 * POINTS`` points (see the module)."""

    __slots__ = (
        "busy", "calls", "ends", "failed", "failures", "functions", "kills", "leak", "node",
        "peaks", "pid", "stride", "total",
    )  # fmt: skip

    def __init__(self) -> None:
        self.ends: array[float] = array("d")  # when each point's last call ended (epoch s)
        self.calls: array[int] = array("q")  # how many calls each point sums
        self.busy: array[float] = array("d")  # the seconds those calls ran
        self.failed: array[int] = array("q")  # how many of them failed
        self.peaks: array[int] = array("q")  # the highest RSS at their ends (-1: unknown)
        self.functions: list[str] | None = []  # each point's function, while a point is a call
        self.stride = 1  # the calls a new point sums
        self.total = 0
        self.failures = _Marks()
        self.kills = _Marks()
        self.leak = ""  # the leak finding's title, if this process leaks
        self.pid: int | None = None
        self.node = ""

    def close(self, last: Call, calls: int, busy: float, failed: int, peak: int) -> None:
        """Add a point: ``calls`` calls that ran ``busy`` seconds, ``last`` the last of them."""
        stamp = last.ended or last.started
        if not stamp:
            return
        self.ends.append(seconds(stamp))
        self.calls.append(calls)
        self.busy.append(busy)
        self.failed.append(failed)
        self.peaks.append(peak)
        self.total += calls
        if self.functions is not None:
            self.functions.append(sys.intern(last.function))  # one copy of each name
        if len(self.ends) >= 2 * POINTS:
            self._halve()

    def _halve(self) -> None:
        """Merge the points in pairs: each new point will sum twice as many calls."""
        ends, calls, busy, failed, peaks = self.ends, self.calls, self.busy, self.failed, self.peaks
        half = len(ends) // 2
        for i in range(half):
            a, b = 2 * i, 2 * i + 1
            ends[i] = ends[b]
            calls[i] = calls[a] + calls[b]
            busy[i] = busy[a] + busy[b]
            failed[i] = failed[a] + failed[b]
            peaks[i] = max(peaks[a], peaks[b])
        for values in (ends, calls, busy, failed, peaks):
            del values[half:]
        self.functions = None
        self.stride *= 2

    def __getstate__(self) -> dict[str, Any]:
        """The lane as it travels: its arrays packed (about a quarter of their bytes)."""
        state = {name: getattr(self, name) for name in self.__slots__}
        for name in _FLOATS:
            state[name] = pack_floats(state[name], keep_order=True)
        for name in _INTS:
            state[name] = pack_ints(state[name])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        for name in _FLOATS:
            setattr(self, name, unpack_floats(state[name]))
        for name in _INTS:
            setattr(self, name, array("q", unpack_ints(state[name])))

    def failure(self, call: Call) -> None:
        """Mark a failed call, at its end."""
        self.failures.add(call.ended or call.started, call.function, call.error_type or "?")

    def kill(self, call: Call) -> None:
        """Mark a call that has no end, at its start."""
        self.kills.add(call.started, call.function, call.call_id)

    def name(self, call: Call) -> None:
        """Take the process's pid and node from one of its calls."""
        self.pid, self.node = call.pid, (call.node_id or "")[:12]

    def data(self, origin: float, causes: dict[str, str]) -> dict[str, Any]:
        """The lane as plain data, times in seconds from ``origin``.

        ``causes`` say, by call id, why a call without an end has none.
        """
        return {
            "pid": self.pid,
            "node": self.node,
            "calls": self.total,
            "calls_per_point": self.stride,
            "leak": self.leak or None,
            "points": [
                [round(end - origin, 6), calls, round(busy, 6), failed, peak if peak >= 0 else None]
                for end, calls, busy, failed, peak in zip(
                    self.ends, self.calls, self.busy, self.failed, self.peaks, strict=True
                )
            ],
            "functions": self.functions,
            "failures": [[round(t - origin, 6), f, e] for t, f, e in self.failures.kept],
            "failure_count": self.failures.count,
            "kills": [
                [round(t - origin, 6), f, causes.get(call_id) or "not looked up (too many)"]
                for t, f, call_id in self.kills.kept
            ],
            "kill_count": self.kills.count,
        }


_FLOATS, _INTS = ("ends", "busy"), ("calls", "failed", "peaks")  # a lane's packed arrays


def lanes_data(
    lanes: list[Lane], origin: float, causes: dict[str, str]
) -> tuple[list[dict[str, Any]], int]:
    """The lanes a picture draws, as plain data, and how many more there were.

    The leaking, failing and killed processes first, then the busiest; drawn in order of
    node and pid.
    """
    chosen = sorted(
        lanes,
        key=lambda lane: (not (lane.leak or lane.failures.count or lane.kills.count), -lane.total),
    )[:LANES_DRAWN]
    chosen.sort(key=lambda lane: (lane.node, lane.pid or 0))
    return [lane.data(origin, causes) for lane in chosen], len(lanes) - len(chosen)
