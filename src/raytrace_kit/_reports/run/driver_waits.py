"""What the driver's waits say to the report: ray.get in a loop, and the stragglers it waited on.

A line whose gets each waited on the one call submitted just before is a ray.get-in-a-loop;
a long wait on several calls names the call that held it alone (the straggler), from the
calls' own ends, which the report's one pass over the calls collects for the tasks these
waits name (:attr:`~raytrace_kit._reports.reading.driver.DriverRecord.wanted`).
"""

from __future__ import annotations

from collections.abc import Mapping

from raytrace_kit._reports.reading.columns import seconds
from raytrace_kit._reports.reading.driver import (
    HELD_MIN_S,
    HELD_SHARE,
    LOOP_MIN_GETS,
    RAN_SHARE,
    DriverRecord,
    Wait,
    Waited,
    short_file,
)
from raytrace_kit._reports.run.finding import Finding, loop_title, most_first

__all__ = ["driver_findings"]


def driver_findings(
    record: DriverRecord,
    waited: dict[str, Waited | None] | None,
    called: Mapping[str, Mapping[str, int]] | None = None,
) -> list[Finding]:
    """The ray.get-in-a-loop lines, then the stragglers the driver waited on.

    ``called``: the driver's calls by the line that submitted them, by function (from
    the submission records): a loop's line names the functions it waited on.
    """
    return [*_loops(record, called or {}), *_stragglers(record, waited or {})]


def _loops(record: DriverRecord, called: Mapping[str, Mapping[str, int]]) -> list[Finding]:
    found = []
    for site in sorted(record.sites.values(), key=lambda s: -s.serial_s):
        if site.serial < LOOP_MIN_GETS or 2 * site.serial < site.count:
            continue
        where = f"{short_file(site.file, record.cwds)}:{site.line}"
        # The calls submitted at the get's own line: ray.get(f.remote(x)).
        functions = most_first(called.get(f"{site.file}:{site.line}", {}))
        found.append(Finding(
            loop_title(where, site.serial, functions),
            f"{site.serial} ray.get calls at {where} (in {site.function}) each waited on "
            "the one call submitted just before it, so those calls ran one at a time; "
            f"the driver blocked {site.serial_s:.2f} s there in all",
            "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
            "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef on "
            "instead of its value (x = f.remote(x)): Ray chains them without a round trip "
            "through the driver",
            "driver_loop", f"{site.file}:{site.line}", functions,
        ))  # fmt: skip
    return found


def _stragglers(record: DriverRecord, waited: dict[str, Waited | None]) -> list[Finding]:
    worst: dict[str, tuple[float, Finding]] = {}  # per line of code: the longest hold
    for _, _, wait in sorted(record.long_waits, reverse=True):
        calls = [w for t in dict.fromkeys(wait.task_ids) if (w := waited.get(t)) is not None]
        if len(calls) < 2:
            continue
        calls.sort(key=lambda w: w.ended)
        last, before = calls[-1], calls[-2]
        begun = seconds(wait.started)
        end, others = seconds(last.ended), max(seconds(before.ended), begun)
        held = end - others
        if held < HELD_MIN_S or held < HELD_SHARE * wait.blocked_s:
            continue
        # Of the hold, the time the call itself ran: one that began late (a worker still
        # starting, its arguments still being made) ended late for want of a start.
        ran = (
            held if last.call.duration_s is None else end - max(others, end - last.call.duration_s)
        )
        if ran < HELD_MIN_S or ran < RAN_SHARE * held:
            continue
        if wait.where in worst and worst[wait.where][0] >= held:
            continue
        worst[wait.where] = (held, _straggler(wait, calls, held, begun, record.cwds))
    return [finding for _, finding in worst.values()]


def _straggler(
    wait: Wait, calls: list[Waited], held: float, begun: float, cwds: list[str]
) -> Finding:
    last, call = calls[-1], calls[-1].call
    others = seconds(calls[-2].ended) - begun
    task = (call.task_id or "")[:16]
    where = f"task {task or '?'}, node {(call.node_id or '?')[:12]}, pid {call.pid}"
    if last.arguments:
        where += f", arguments {last.arguments}"
    return Finding(
        f"The driver waited on a straggler: {call.function}",
        f"{wait.verb} at {short_file(wait.file, cwds)}:{wait.line} (in {wait.function}) blocked "
        f"{wait.blocked_s:.2f} s on {len(calls)} calls; {len(calls) - 1} were done "
        f"{max(others, 0.0):.2f} s in, and call {call.call_id} ({where}) held it "
        f"{held:.2f} s more",
        "look at what sets that call apart: its input, its node"
        + (f" (raytrace-kit explain --task {task})" if task else "")
        + "; split skewed inputs so that no call gets far more work, or take results as they "
        "finish (ray.wait(refs, num_returns=1) in a loop) so one slow call does not hold up "
        "the rest",
        "driver_straggler", call.function,
    )  # fmt: skip
