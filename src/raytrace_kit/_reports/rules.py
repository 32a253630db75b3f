"""The findings' rules: what in a run's aggregates deserves a finding, with its evidence and fix.

Each rule reads the :class:`~raytrace_kit._reports.tally.Tally` a report streamed into,
and returns its findings; the thresholds are here, named, where a reader can weigh them.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

from raytrace_kit._reports.finding import Finding
from raytrace_kit._reports.tally import Tally

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
SERIAL_ACTOR_SHARE = 0.5  # an actor busy at least this share of the run...
SERIAL_QUEUE_SHARE = 0.5  # an actor's call that waited half its busy time in its queue...
SERIAL_QUEUE_MIN_S = 0.1  # ...and at least this long: its calls waited for each other
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
    for parent, times in tally.children.items():
        kids = len(times) // 2
        if kids < SERIAL_MIN_CHILDREN:
            continue
        spans = sorted(zip(times[::2], times[1::2], strict=True))
        if all(later[0] >= earlier[1] - 1e-4 for earlier, later in itertools.pairwise(spans)):
            kids_of[parent] = kids
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
    tally: Tally, span: float, queued: dict[str, float] | None = None
) -> list[Finding]:
    """One actor running the work back to back while the rest of the run idles.

    With submission records (``queued``: each actor's longest time in its queue), also an
    actor whose calls were submitted together and waited for each other in its queue,
    whatever the rest of the run did: the seeds' one ``Sleeper`` actor.
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
        waited = (queued or {}).get(actor_id, 0.0)
        in_queue = waited >= SERIAL_QUEUE_SHARE * run.busy and waited >= SERIAL_QUEUE_MIN_S
        if not in_queue and (
            share < SERIAL_ACTOR_SHARE
            or others >= 1.0
            or mean_gap > max(SERIAL_GAP_S, 0.1 * run.busy / run.calls)
        ):
            continue
        owner = run.function.rsplit(".", 1)[0]
        queue = (
            f"; calls submitted together waited for each other in its queue, the longest "
            f"{waited:.2f} s"
            if in_queue
            else ""
        )
        found.append(Finding(
            f"One actor serializes the work: {owner} ({actor_id[:12]})",
            f"its {run.calls} calls ran back to back (mean gap {mean_gap * 1000:.1f} ms) and "
            f"kept it busy {share:.0%} of the run, while all other calls together kept "
            f"{others:.1f} processes busy on average{queue}",
            "spread the work over several actors (ray.util.ActorPool), move stateless work "
            "into tasks, or let calls that wait on I/O overlap (async methods, "
            "max_concurrency)",
            "serializing_actor", owner,
        ))  # fmt: skip
    return found


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
