"""A process's runs of calls, each ending with more RSS than the one before: the leak finding.

:class:`LeakRun` follows one process's calls as a report streams over them, in the order
its files have them, and keeps the worst run: the one that grew the process most among
those at least :data:`LEAK_MIN_CALLS` long (shorter runs cost a list).

Its evidence, each part needed: growth after the process's first call (the first
:data:`LEAK_WARMUP_CALLS` imports modules and makes first allocations: not counted), made
during the calls themselves (:data:`LEAK_MIN_BYTES` of the calls' own growth, not RSS that
rose between them), and still going on: a run followed by :data:`LEAK_PLATEAU_CALLS`
calls that never take the process past its top was a cache or a pool filling up to its
size, not a leak (as many calls again as the run was long made a cache's fill late in a
process a leak).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports.run.finding import Finding

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call

__all__ = [
    "LEAK_MIN_BYTES",
    "LEAK_MIN_CALLS",
    "LEAK_PLATEAU_CALLS",
    "LEAK_WARMUP_CALLS",
    "LeakRun",
]

LEAK_MIN_CALLS = 5  # a process whose RSS rose over at least this many calls in a row...
LEAK_MIN_BYTES = 32 * 2**20  # ...by at least this much in all, during the calls: the signature
LEAK_WARMUP_CALLS = 1  # a process's first call: its imports, first allocations (not counted)
LEAK_PLATEAU_CALLS = 5  # a run followed by this many calls none above its top
_GREW = 2**20  # a call that grew its process by less is not named as growing it


class _Run:
    """Calls in a row of one process, each ending with more RSS than the one before."""

    __slots__ = (
        "first",
        "functions",
        "grown",
        "in_calls",
        "length",
        "rss_from",
        "rss_top",
        "some",
        "tasks",
        "top",
    )

    def __init__(self, calls: list[Call]) -> None:
        first = calls[0]
        self.first = first
        self.rss_from = first.rss_start_bytes or first.rss_end_bytes or 0
        self.rss_top = self.rss_from
        self.length = 0
        self.grown = 0
        self.in_calls = 0  # what the calls themselves grew it by (each one's end - start)
        self.tasks = True  # every call a task's: the process is a task worker
        self.functions: set[str] = set()
        self.some: set[str] = set()
        self.top: list[tuple[int, str, str]] = []
        for call in calls:
            self.extend(call, call.rss_end_bytes or 0)

    def extend(self, call: Call, rss: int) -> None:
        self.length += 1
        self.grown = rss - self.rss_from
        self.rss_top = rss
        self.tasks = self.tasks and call.kind == "task"
        growth = call.rss_growth_bytes or 0
        if growth > 0:
            self.in_calls += growth
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

    The worst is the one that grew most among those at least :data:`LEAK_MIN_CALLS` long
    and :data:`LEAK_MIN_BYTES` during their calls, after the process's first call; shorter
    runs cost a list. After it, the calls that kept the process at or under its top are
    counted (:attr:`flat`): enough of them, and it was a fill, not a leak.
    """

    __slots__ = (
        "best",
        "capture",
        "flat",
        "last_path",
        "last_rss",
        "passed",
        "run",
        "seen_calls",
        "short",
    )

    def __init__(self) -> None:
        self.capture: str | None = None  # the process's memray capture, if it has one
        self.last_path = ""
        self.short: list[Call] = []  # the current run while shorter than LEAK_MIN_CALLS
        self.run: _Run | None = None  # the current run once long enough
        self.best: _Run | None = None  # the worst run that is evidence enough, once closed
        self.flat = 0  # calls since the best run that kept the process at or under its top
        self.passed = False  # a call since the best run took the process past its top
        self.last_rss = -1
        self.seen_calls = 0

    def seen(self, path: str) -> None:
        """A call's capture: the process's once two calls share it (a per-call one is not)."""
        if path == self.last_path:
            self.capture = path
        self.last_path = path

    def add(self, call: Call, rss: int) -> None:
        """The process's next call (in its files' order) that ended with ``rss``."""
        self.seen_calls += 1
        if self.seen_calls <= LEAK_WARMUP_CALLS:  # imports, first allocations: no run yet
            self.last_rss = rss
            return
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
        best = self.best
        if best is not None:  # a call after the best run: did the growth go on?
            if rss > best.rss_top + max(_GREW, best.in_calls // best.length):
                self.passed = True
            else:
                self.flat += 1

    def _close(self) -> None:
        run = self.run
        if (
            run is not None
            and run.in_calls >= LEAK_MIN_BYTES
            and (self.best is None or run.grown > self.best.grown)
        ):
            self.best, self.flat, self.passed = run, 0, False
        self.run = None

    def finding(self) -> Finding | None:
        """The finding of the worst run, if the process's calls show a leak."""
        self._close()
        best = self.best
        if best is None or best.grown < LEAK_MIN_BYTES:
            return None
        if not self.passed and self.flat >= LEAK_PLATEAU_CALLS:
            return None  # it grew to a size and stayed there: a cache, a pool, filled
        grew = ", ".join(
            f"{function.rsplit('.', 1)[-1]} call {call_id} +{growth / 2**20:.0f} MiB"
            for growth, call_id, function in sorted(best.top, reverse=True)
            if growth >= _GREW  # only the calls that grew it are named
        )
        first = best.first
        functions = ", ".join(sorted(best.functions or best.some))
        return Finding(
            f"Memory grows call after call: pid {first.pid} on node {(first.node_id or '?')[:12]}",
            f"RSS rose over {best.length} calls in a row, by {best.grown / 2**20:.0f} MiB in "
            f"all ({best.in_calls / 2**20:.0f} MiB during the calls, after the process's "
            f"first), in calls of {functions}"
            + (f" (most: {grew})" if grew else "")
            + ": something keeps what each call makes",
            self._fix(best),
            "leak",
            functions,
        )

    def _fix(self, best: _Run) -> str:
        """How to see what is kept: the capture there is, or how to make one that fits."""
        if self.capture:
            return (
                "see what is still allocated at the end of that process's memray capture: "
                f"python -m memray flamegraph --leaks {self.capture}"
            )
        if best.tasks:  # a task worker: no actor to follow; each call's own capture
            return (
                "profile the calls with memray: @debuggable(profile='memray') (or raytrace-kit "
                "run --profile memray), then python -m memray flamegraph --leaks on a later "
                "call's capture (its profile_path) shows what that call allocated and kept: "
                "module-level state (a global list or cache) lives on in the worker between "
                "tasks"
            )
        return (
            "capture that actor's whole life: @debuggable(profile='memray', "
            "profile_scope='actor'), then python -m memray flamegraph --leaks on its "
            "capture (the calls' profile_path) shows what is still allocated at the end"
        )
