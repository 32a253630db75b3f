"""What a report's in-flight sections say: ray.get loops, calls queued while idle, stuck calls.

Judged from what ``flights.flights`` made of the joined records (one pass, or a
cluster's merge): the driver's lines whose calls each waited for the one before, the
functions whose calls waited in queue while the worker that ran them idled, and the
calls that reported themselves stuck.
"""

from __future__ import annotations

from typing import Any

from raytrace_kit._reports.run.finding import Finding, loop_title, most_first

__all__ = ["QUEUE_FINDING_S", "flight_findings"]

QUEUE_FINDING_S = 1.0  # a function whose calls wait this long (median) in queue...
QUEUE_FINDING_RATIO = 2.0  # ...and longer than this many times they run: a finding...
QUEUE_MIN_CALLS = 5  # ...counting only the wait while their worker idled, over this many


def flight_findings(
    found: dict[str, Any], durations: dict[str, float], said: set[str]
) -> list[Finding]:
    """The driver's ray.get loops, calls that queued longer than they ran, stuck calls.

    ``said``: the subjects of findings made already (the driver's record names its
    loops by line too: each is said once).
    """
    return [*_loops(found, said), *_queued(found, durations), *_stuck(found)]


def _loops(found: dict[str, Any], said: set[str]) -> list[Finding]:
    """The driver's lines whose calls were each submitted after the one before ended."""
    made = []
    for loop in found["loops"]:
        if loop["site"] in said:
            continue
        called = most_first(found["called"].get(loop["site"], {}))
        made.append(
            Finding(
                loop_title(loop["site"], loop["calls"], called),
                f"{loop['serial']} of the {loop['calls']} calls submitted at {loop['site']} "
                "were each submitted after the one before had ended: the driver waited on "
                "each before submitting the next, so they ran one at a time",
                "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
                "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef "
                "on instead of its value (x = f.remote(x))",
                "driver_loop",
                loop["site"],
                called,
            )
        )
    return made


def _queued(found: dict[str, Any], durations: dict[str, float]) -> list[Finding]:
    """Functions whose calls waited in queue, longer than they ran, while their workers idled."""
    made = []
    for row in found["queued"]:
        ran = durations.get(row["function"])
        idled = found["backlog"].get(row["function"])
        if ran is None or idled is None or idled["count"] < QUEUE_MIN_CALLS:
            continue
        wait = idled["p50_s"]  # no call ahead of it, no worker start-up explains it
        if wait < QUEUE_FINDING_S or wait < QUEUE_FINDING_RATIO * ran:
            continue
        made.append(
            Finding(
                f"Calls waited in queue while their workers idled: {row['function']}",
                f"{idled['count']} calls waited {wait:.2f} s (median; up to "
                f"{idled['max_s']:.2f} s) after .remote() while the worker that then ran each "
                f"one sat idle, and ran {ran:.2f} s (median): not behind other calls, not for "
                "a worker to start, not for their arguments, so for something else the "
                f"scheduler lacked (the median call waited {row['p50_s']:.2f} s in all)",
                "check what the calls ask for against what is free (num_cpus, num_gpus, "
                "memory, custom resources, a placement group's bundles): ask for less, or "
                "add what is short; while calls wait, raytrace-kit stuck says what each "
                "pending call waits for",
                "queued",
                row["function"],
            )
        )
    return made


def _stuck(found: dict[str, Any]) -> list[Finding]:
    """The calls that ran past their ``stuck_after``: one finding, the first named."""
    if not found["stuck"]:
        return []
    first = found["stuck"][0]
    where = f" at {first['where']}" if first["where"] else ""
    return [
        Finding(
            f"Calls ran past their stuck_after: {first['function']}"
            + (f" and {len(found['stuck']) - 1} more" if len(found["stuck"]) > 1 else ""),
            f"{len(found['stuck'])} call(s) reported themselves stuck; the first, "
            f"{first['function']} (call {first['call_id']}), was{where} after "
            f"{first['running_s']:.1f} s ({first['outcome']})"
            + (f", waiting in {first['waiting_in']}" if first["waiting_in"] else ""),
            "read each one's stack below (the line it was blocked on); while a job "
            "hangs, raytrace-kit stuck names what each call waits on and any deadlock",
            "stuck_calls",
            first["function"],
        )
    ]
