"""The findings' rules: what in a run's aggregates deserves a finding, with its evidence and fix.

Each rule reads the :class:`~raytrace_kit._reports.run.tally.Tally` a report streamed into,
and returns its findings; the thresholds are here, named, where a reader can weigh them.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from raytrace_kit._reports.run.finding import Finding
from raytrace_kit._reports.run.tally import Tally

__all__ = [
    "STRAGGLER_EXCESS_S",
    "STRAGGLER_MIN_CALLS",
    "STRAGGLER_RATIO",
    "one_at_a_time",
    "other_findings",
    "serializing_actors",
    "straggler_floor",
    "stragglers",
    "tiny_tasks",
]

TINY_SECONDS = 0.010  # a median call shorter than this: scheduling costs more than the work
TINY_MIN_CALLS = 20
SERIAL_MIN_CHILDREN = 5
STRAGGLER_MIN_CALLS = 5  # a function's slowest call, among at least this many...
STRAGGLER_RATIO = 5.0  # ...this many times its median...
STRAGGLER_EXCESS_S = 1.0  # ...and this much longer: one call holds up what waits for all
# With submission records: a call that waited behind the actor's other calls (while they
# ran) at least this long and this share of the run, the actor busy this share at least.
SERIAL_QUEUE_MIN_S = 0.1
SERIAL_WAIT_SHARE = 0.1
SERIAL_BUSY_SHARE = 0.1
# Without them (nothing says who waited): the actor busy this share of the run...
SERIAL_ACTOR_SHARE = 0.5
SERIAL_GAP_S = 0.002  # ...its calls this close (or a tenth of a call)...: it is the queue


def straggler_floor(median: float) -> float:
    """How long a call of a function with this median takes to be a straggler."""
    return max(STRAGGLER_RATIO * median, median + STRAGGLER_EXCESS_S)


def tiny_tasks(tally: Tally) -> list[Finding]:
    found = []
    for function, aggregate in sorted(tally.functions.items()):
        values = aggregate.durations
        if not aggregate.task or len(values) < TINY_MIN_CALLS:
            continue
        median = statistics.median(values)
        if median < TINY_SECONDS:
            found.append(Finding(
                f"Tasks too small: {function}",
                f"{len(values)} calls, median {median * 1000:.2f} ms: Ray's cost of "
                "scheduling a task (about a millisecond) outweighs the work",
                "batch the work: one task per chunk of items instead of one per item",
                "tiny_tasks", function,
            ))  # fmt: skip
    return found


def stragglers(tally: Tally) -> list[Finding]:
    found = []
    for function, aggregate in sorted(tally.functions.items()):
        values, call = aggregate.durations, aggregate.slowest
        if call is None or call.duration_s is None or len(values) < STRAGGLER_MIN_CALLS:
            continue
        median, took = statistics.median(values), call.duration_s
        if took < straggler_floor(median):
            continue
        task = (call.task_id or "")[:16]
        where = f"task {task or '?'}, node {(call.node_id or '?')[:12]}, pid {call.pid}"
        start = aggregate.start_event() or {}
        if "args" in start or "kwargs" in start:
            where += f", arguments {start.get('args', [])} {start.get('kwargs', {})}"
        found.append(Finding(
            f"A straggler: {function}",
            f"one call took {took:.2f} s where its {len(values)} calls' median is "
            f"{median:.2f} s ({where})",
            "look at what sets that call apart: its input, its node"
            + (f" (raytrace-kit explain --task {task})" if task else "")
            + "; split skewed inputs so that no call gets far more work, or collect results "
            "with ray.wait(refs, timeout=...) so one slow call does not hold up the rest",
            "straggler", function,
        ))  # fmt: skip
    return found


def one_at_a_time(tally: Tally) -> list[Finding]:
    """Parents whose task calls never overlapped: one finding per parent function."""
    kids_of: dict[str, int] = {}  # parent call id -> its task calls, none overlapping
    for parent, children in tally.children.items():
        if children.count >= SERIAL_MIN_CHILDREN and children.one_at_a_time():
            kids_of[parent] = children.count
    serial: dict[str, list[Any]] = {}  # function -> [parents, their children, one parent]
    for parent, function in tally.names_of(list(kids_of)).items():
        counts = serial.setdefault(function, [0, 0, parent])
        counts[0] += 1
        counts[1] += kids_of[parent]
    found = []
    for function, (parents, kids, one) in sorted(serial.items(), key=lambda item: -item[1][1]):
        if parents == 1:
            evidence = f"one of its calls ({one}) waited on its {kids} task calls one at a time"
        else:
            evidence = f"{parents:,} of its calls waited on their {kids:,} task calls one at a time"
        found.append(Finding(
            f"Calls submitted and waited on one at a time by {function}",
            f"{evidence}: each started after the previous ended (the ray.get-in-a-loop "
            "pattern)" + (f". One of them: call {one}" if parents > 1 else ""),
            "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
            "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef on "
            "instead of its value (x = f.remote(x)): Ray chains them without a round trip "
            "through the caller",
            "one_at_a_time", function,
        ))  # fmt: skip
    return found


def serializing_actors(
    tally: Tally,
    span: float,
    queued: dict[str, float] | None = None,
    made: dict[str, dict[str, Any]] | None = None,
) -> list[Finding]:
    """Actors whose callers waited on them: their calls queued behind each other.

    With submission records (``queued``: each actor's longest wait behind its other
    calls, while they ran: :func:`flights.behind`), the evidence is that wait: at least
    :data:`SERIAL_QUEUE_MIN_S` and :data:`SERIAL_WAIT_SHARE` of the run, the actor busy
    :data:`SERIAL_BUSY_SHARE` of it at least. An actor busy all run whose callers never
    waited (an ``ActorPool``'s, given a call as it finishes one) serializes nothing.
    Without them, only the pattern: calls back to back while the actor was busy half the
    run and the rest of it idled (the seeds' one ``Sleeper`` actor). ``made``: each
    actor's ``async`` and ``max_concurrency``, so that the fix fits what it is.
    """
    if span <= 0:
        return []
    total_busy = math.fsum(math.fsum(a.durations) for a in tally.functions.values())
    found = []
    for actor_id, run in tally.actors.items():
        if run.calls < SERIAL_MIN_CHILDREN or run.overlapped:
            continue
        share = run.busy / span
        mean_gap = run.gaps / (run.calls - 1)
        others = max(total_busy - run.busy, 0.0) / span  # processes busy on average
        if queued is not None and actor_id in queued:
            waited = queued[actor_id]
            if (
                waited < max(SERIAL_QUEUE_MIN_S, SERIAL_WAIT_SHARE * span)
                or share < SERIAL_BUSY_SHARE
            ):
                continue
            queue = (
                f"; calls submitted together waited for each other in its queue, the longest "
                f"{waited:.2f} s ({waited / span:.0%} of the run)"
            )
        elif (
            share < SERIAL_ACTOR_SHARE
            or others >= 1.0
            or mean_gap > max(SERIAL_GAP_S, 0.1 * run.busy / run.calls)
        ):
            continue
        else:
            queue = ""
        owner = run.function.rsplit(".", 1)[0]
        found.append(Finding(
            f"One actor serializes the work: {owner} ({actor_id[:12]})",
            f"its {run.calls} calls ran back to back (mean gap {mean_gap * 1000:.1f} ms) and "
            f"kept it busy {share:.0%} of the run, while all other calls together kept "
            f"{others:.1f} processes busy on average{queue}",
            _serial_fix((made or {}).get(actor_id, {})),
            "serializing_actor", owner,
        ))  # fmt: skip
    return found


def _serial_fix(made: dict[str, Any]) -> str:
    """The fix for an actor whose calls ran one at a time, as fits how it runs them."""
    spread = (
        "spread the work over several actors (ray.util.ActorPool) or move stateless work into tasks"
    )
    if made.get("async"):  # async already: something in its methods holds the event loop
        return (
            "its methods are async, yet its calls never overlapped: something in them "
            "blocks the event loop (time.sleep, a blocking client, CPU-bound work). Await "
            "instead (asyncio.sleep, an async client), or run the blocking part off the "
            f"loop (await asyncio.to_thread(f, ...)); if the work is CPU-bound, {spread}"
        )
    if (made.get("max_concurrency") or 1) > 1:  # threaded: a lock, or the GIL
        return (
            f"it may run {made['max_concurrency']} calls at once (max_concurrency), yet they "
            "never overlapped: a lock held around the work, or pure-Python CPU work under "
            f"the GIL, runs them one at a time; {spread}"
        )
    return (
        f"{spread}, or let calls that wait on I/O overlap (async methods, or "
        "max_concurrency=N for threads)"
    )


def other_findings(tally: Tally) -> list[Finding]:
    found = []
    if tally.busy:
        ratio, function = tally.busiest
        found.append(Finding(
            f"CPU oversubscription: {function}",
            f"{tally.busy} call(s) kept more than one CPU busy (up to {ratio:.1f} CPUs: their "
            "process's CPU time over their wall time): a library's threads, on a node where "
            "Ray counts each task as the CPUs it asked for (1 by default)",
            "limit the library's threads to the CPUs asked for (OMP_NUM_THREADS, "
            "MKL_NUM_THREADS, torch.set_num_threads) or ask for as many CPUs (num_cpus=)",
            "cpu_oversubscription", function,
        ))  # fmt: skip
    retried = sorted(
        ((a.retries, f) for f, a in tally.functions.items() if a.retries), reverse=True
    )
    if retried:
        names = ", ".join(f"{f} ({count})" for count, f in retried[:5])
        more = f" and {len(retried) - 5} more" if len(retried) > 5 else ""
        found.append(Finding(
            f"Retries hide flaky functions: {retried[0][1]}"
            + (f" and {len(retried) - 1} more" if len(retried) > 1 else ""),
            f"{sum(c for c, _ in retried)} call(s) succeeded only after a retry: {names}{more}",
            "find why the first attempts fail: open_session().calls(function=..., "
            "status='error') and their tracebacks (or raytrace-kit events --status error)",
            "flaky_retries", retried[0][1],
        ))  # fmt: skip
    return found
