"""The nodes' live views merged into one :class:`~.top.TopView` (what ``raytrace-kit top`` shows).

Each node sends counts per function, a histogram of durations, its oldest calls in
flight, its latest failures and processes (``aggregates.py``); :func:`merge` adds them up. A
function's pending calls are those submitted and not yet started (their ``call.submit``
and ``call.start`` may be on two nodes: counts add up where ids would not have to
travel); stragglers are calls, running or finished, far beyond their function's median
(the report's rule: ``rules.straggler_floor``).
"""

from __future__ import annotations

from typing import Any

from raytrace_kit._reports.live.aggregates import medians_of, percentile
from raytrace_kit._reports.live.samples import merge_hot_lines
from raytrace_kit._reports.live.top import ROWS, TopView
from raytrace_kit._reports.run.rules import straggler_floor

__all__ = ["merge"]


def merge(
    source: str, states: list[dict[str, Any]], before: TopView | None, problems: list[str]
) -> TopView:
    """The nodes' views (``LiveTally.snapshot`` and the reader's own figures) as one."""
    totals: dict[str, list[Any]] = {}
    bins: dict[str, dict[int, int]] = {}
    flying: list[dict[str, Any]] = []
    finished: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    events = behind = 0
    operators: dict[str, str] = {}
    kinds: dict[tuple[str, str], list[Any]] = {}
    for state in states:
        operators.update(state.get("operators") or {})
        for function, error_type, count, latest in state.get("failure_kinds") or ():
            kind = kinds.setdefault((function, error_type), [0, latest])
            kind[0] += count
            if latest["ended"] > kind[1]["ended"]:
                kind[1] = latest
        events += state["events"]
        behind += state.get("behind", 0)
        for name, (running, submitted, started, done, failed, died, hist, slowest) in state[
            "functions"
        ].items():
            row = totals.setdefault(name, [0, 0, 0, 0, 0, 0, 0.0])
            for i, value in enumerate((running, submitted, started, done, failed, died)):
                row[i] += value
            row[6] = max([row[6], *(call["running_s"] for call in slowest)])
            merged = bins.setdefault(name, {})
            for k, count in hist.items():
                merged[k] = merged.get(k, 0) + count
            finished.extend(slowest)
        flying.extend(state["oldest"])
        failures.extend(state["failures"])
        nodes.append(_node_row(state))
    medians = medians_of(bins)
    view = TopView(source=source, time=max((s["time"] for s in states), default=0.0))
    view.functions = sorted(
        (_function_row(name, row, bins[name]) for name, row in totals.items()),
        key=lambda r: (-(r["running"] + r["pending"]), r["function"]),
    )
    view.oldest = sorted(flying, key=lambda c: -c["running_s"])[:ROWS]
    view.stragglers = _stragglers(flying, finished, medians)
    view.failures = sorted(failures, key=lambda f: f["ended"], reverse=True)[:ROWS]
    view.nodes = sorted(nodes, key=lambda n: n["node_id"])
    view.events, view.behind_bytes, view.problems, view.medians = events, behind, problems, medians
    if before is not None and view.time > before.time:
        view.events_per_s = max(events - before.events, 0) / (view.time - before.time)
    view.operators = _operators(view, operators, before)
    view.hot_lines = merge_hot_lines(state.get("hot_lines") or [] for state in states)
    view.failure_groups = sorted(
        (
            {"function": f, "error_type": t, "count": n, "example": latest}
            for (f, t), (n, latest) in kinds.items()
        ),
        key=lambda g: g["example"]["ended"],
        reverse=True,
    )[:ROWS]
    return view


def _operators(
    view: TopView, operators: dict[str, str], before: TopView | None
) -> list[dict[str, Any]]:
    """One row per Ray Data operator: its UDFs' batches in flight, done, failed, rate."""
    done_before = {row["operator"]: row["done"] for row in (before.operators if before else [])}
    elapsed = view.time - before.time if before is not None and view.time > before.time else 0
    rows: dict[str, dict[str, Any]] = {}
    for function in view.functions:
        operator = operators.get(function["function"])
        if operator is None or function["function"].endswith(".__init__"):
            continue
        row = rows.setdefault(
            operator,
            {
                "operator": operator,
                "functions": [],
                "in_flight": 0,
                "done": 0,
                "failed": 0,
                "p50_s": function["p50_s"],
                "per_s": None,
            },
        )
        row["functions"].append(function["function"])
        row["in_flight"] += function["running"]
        row["done"] += function["done"]
        row["failed"] += function["failed"]
    for row in rows.values():
        if elapsed and row["operator"] in done_before:
            row["per_s"] = max(row["done"] - done_before[row["operator"]], 0) / elapsed
    return sorted(rows.values(), key=lambda r: r["operator"])


def _function_row(name: str, row: list[Any], bins: dict[int, int]) -> dict[str, Any]:
    running, submitted, started, done, failed, died, longest = row
    return {
        "function": name,
        "running": running,
        "pending": max(submitted - started, 0),
        "done": done,
        "failed": failed + died,
        "died": died,
        "p50_s": percentile(bins, 0.5),
        "p95_s": percentile(bins, 0.95),
        "max_s": longest if bins else None,
    }


def _node_row(state: dict[str, Any]) -> dict[str, Any]:
    processes = state["processes"]
    return {
        "node_id": state.get("node_id") or "?",
        "processes": len(processes),
        "rss_bytes": sum(p["rss_bytes"] or 0 for p in processes),
        "largest_rss_bytes": max((p["rss_bytes"] or 0 for p in processes), default=0),
        "running": sum(row[0] for row in state["functions"].values()),
        "reader_cpu": state.get("cpu_share"),
    }


def _stragglers(
    flying: list[dict[str, Any]], finished: list[dict[str, Any]], medians: dict[str, float]
) -> list[dict[str, Any]]:
    """Calls, running or finished, far beyond their function's median (the report's rule)."""
    found = []
    for call in [*flying, *finished]:
        median = medians.get(call["function"])
        if median is not None and call["running_s"] >= straggler_floor(median):
            found.append({**call, "median_s": median})
    found.sort(key=lambda c: -c["running_s"] / max(c["median_s"], 1e-6))
    return found[:ROWS]
