"""A process's runs of calls, each ending with more RSS than the one before: the leak finding.

:class:`LeakRun` follows one process's calls as a report streams over them, in the order
its files have them, and keeps the worst run: the one that grew the process most among
those at least :data:`LEAK_MIN_CALLS` long (shorter runs cost a list).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports.finding import Finding

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call

__all__ = ["LEAK_MIN_BYTES", "LEAK_MIN_CALLS", "LeakRun"]

LEAK_MIN_CALLS = 5  # a process whose RSS rose over at least this many calls in a row...
LEAK_MIN_BYTES = 32 * 2**20  # ...by at least this much in all: the leak signature
_GREW = 2**20  # a call that grew its process by less is not named as growing it


class _Run:
    """Calls in a row of one process, each ending with more RSS than the one before."""

    __slots__ = ("first", "functions", "grown", "length", "rss_from", "some", "top")

    def __init__(self, calls: list[Call]) -> None:
        first = calls[0]
        self.first = first
        self.rss_from = first.rss_start_bytes or first.rss_end_bytes or 0
        self.length = 0
        self.grown = 0
        self.functions: set[str] = set()
        self.some: set[str] = set()
        self.top: list[tuple[int, str, str]] = []
        for call in calls:
            self.extend(call, call.rss_end_bytes or 0)

    def extend(self, call: Call, rss: int) -> None:
        self.length += 1
        self.grown = rss - self.rss_from
        growth = call.rss_growth_bytes or 0
        if growth >= _GREW:  # the functions whose calls grew it...
            self.functions.add(call.function)
        elif growth > 0:  # ...or, for a slow leak of many small steps, grew it at all
            self.some.add(call.function)
        self.top.append((call.rss_growth_bytes or 0, call.call_id, call.function))
        if len(self.top) > 3:  # keep the three calls that grew the process most
            self.top.sort(reverse=True)
            del self.top[3:]


class LeakRun:
    """A process's runs of calls, each ending with more RSS than the last: the worst.

    The worst is the one that grew most among those at least :data:`LEAK_MIN_CALLS` long;
    shorter runs cost a list.
    """

    __slots__ = ("best", "capture", "last_path", "last_rss", "run", "short")

    def __init__(self) -> None:
        self.capture: str | None = None  # the process's memray capture, if it has one
        self.last_path = ""
        self.short: list[Call] = []  # the current run while shorter than LEAK_MIN_CALLS
        self.run: _Run | None = None  # the current run once long enough
        self.best: _Run | None = None
        self.last_rss = -1

    def seen(self, path: str) -> None:
        """A call's capture: the process's once two calls share it (a per-call one is not)."""
        if path == self.last_path:
            self.capture = path
        self.last_path = path

    def add(self, call: Call, rss: int) -> None:
        if rss > self.last_rss and (self.short or self.run is not None):
            if self.run is not None:
                self.run.extend(call, rss)
            else:
                self.short.append(call)
                if len(self.short) >= LEAK_MIN_CALLS:
                    self.run, self.short = _Run(self.short), []
        else:
            self._close()
            self.short = [call]
        self.last_rss = rss

    def _close(self) -> None:
        run = self.run
        if run is not None and (self.best is None or run.grown > self.best.grown):
            self.best = run
        self.run = None

    def finding(self) -> Finding | None:
        self._close()
        best = self.best
        if best is None or best.grown < LEAK_MIN_BYTES:
            return None
        grew = ", ".join(
            f"{function.rsplit('.', 1)[-1]} call {call_id} +{growth / 2**20:.0f} MiB"
            for growth, call_id, function in sorted(best.top, reverse=True)
            if growth >= _GREW  # only the calls that grew it are named
        )
        first = best.first
        if self.capture:
            fix = (
                "see what is still allocated at the end of that process's memray capture: "
                f"python -m memray flamegraph --leaks {self.capture}"
            )
        else:
            fix = (
                "capture that actor's whole life: @debuggable(profile='memray', "
                "profile_scope='actor'), then python -m memray flamegraph --leaks on its "
                "capture (the calls' profile_path) shows what is still allocated at the end"
            )
        return Finding(
            f"Memory grows call after call: pid {first.pid} on node {(first.node_id or '?')[:12]}",
            f"RSS rose over {best.length} calls in a row, by {best.grown / 2**20:.0f} MiB in "
            f"all, in calls of {', '.join(sorted(best.functions or best.some))}"
            + (f" (most: {grew})" if grew else "")
            + ": something keeps what each call makes",
            fix,
            "leak",
            ", ".join(sorted(best.functions or best.some)),
        )
