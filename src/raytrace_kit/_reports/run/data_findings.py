"""The findings of a Ray Data pipeline's operators, and its section of the report.

Each reads the rows of :meth:`~raytrace_kit._reports.run.data_ops.DataOps.rows` and states the
evidence it needs (the constants): the operator that bounds the pipeline and those it holds
back, batches that grow a worker's memory, a skewed batch, a UDF that fails on some batches.
"""

from __future__ import annotations

import statistics
from typing import Any

from raytrace_kit._reports.run.finding import Called, Finding

__all__ = [
    "bound",
    "data_explained",
    "data_section",
    "failing",
    "heavier_batch",
    "memory",
    "skewed",
]

_MIB = 2**20
# The bound: most of the pipeline's UDF time, several times the next operator's, in
# batches long enough to matter.
BOUND_SHARE = 0.5
BOUND_OVER_NEXT = 3.0
BOUND_MIN_P50_S = 0.05
BOUND_MIN_BATCHES = 4
BOUND_MIN_TOTAL_S = 2.0
# Memory: one process's RSS grew this much over its batches of one operator, past its first.
GROWTH_MIN_BYTES = 100 * _MIB
GROWTH_MIN_BATCHES = 3
# A skewed batch: this many times its operator's median, and this much longer.
SKEW_RATIO = 5.0
SKEW_EXCESS_S = 1.0
SKEW_MIN_BATCHES = 5
SKEW_HEAVIER = 2.0  # ...and its block this many times the median batch's rows or bytes


def memory(rows: list[dict[str, Any]], grown: dict[str, list[list[int]]]) -> list[Finding]:
    """Operators whose batches grow one worker's RSS batch after batch."""
    found = []
    for row in rows:
        best: list[int] = []
        for series in grown.get(row["operator"], []):
            if len(series) >= GROWTH_MIN_BATCHES and _rise(series) > _rise(best):
                best = series
        rise = _rise(best)
        # Past the first batch (imports, a model loaded), and still going at the end.
        if rise < GROWTH_MIN_BYTES or best[-1] <= best[len(best) // 2]:
            continue
        per = rise / (len(best) - 1)
        size = f" of {row['batch_size']} rows" if isinstance(row["batch_size"], int) else ""
        found.append(Finding(
            f"{row['operator']}'s batches grow its worker's memory: +{rise / _MIB:.0f} MiB "
            f"over {len(best)} batches in one process ({per / _MIB:.0f} MiB per batch)",
            f"{_udf(row)} ran {row['batches']} batches{size}; in one worker the RSS rose "
            f"batch after batch, to {best[-1] / _MIB:.0f} MiB: something keeps what each "
            "batch makes, and at this rate the worker meets Ray's OOM killer",
            "keep nothing of a batch once it is returned (a list, a cache or an attribute "
            "of the callable class that grows); if one batch is simply large, a smaller "
            "batch_size; profile it with raytrace-kit run --profile memray",
            "data_memory", row["function"] or row["operator"],
            (Called(row["function"] or row["operator"], row["batches"]),),
        ))  # fmt: skip
    return found


def _workers(row: dict[str, Any]) -> str:
    parts = [f"{row[k]} {k if row[k] > 1 else k[:-1]}" for k in ("tasks", "actors") if row[k]]
    return " and ".join(parts) or "no known worker"


def _rise(series: list[int]) -> int:
    return series[-1] - series[0] if len(series) >= 2 else 0


def _udf(row: dict[str, Any]) -> str:
    function = row["function"] or "its UDF"
    at = f" (built at {row['site']})" if row["site"] else ""
    return f"{function}{at}"


def bound(rows: list[dict[str, Any]]) -> list[Finding]:
    """The operator that bounds the pipeline, and the upstream ones it holds back."""
    if len(rows) < 2:
        return []
    ranked = sorted(rows, key=lambda r: -r["total_s"])
    bound, following = ranked[0], ranked[1]
    if (
        bound["share"] < BOUND_SHARE
        or bound["batches"] < BOUND_MIN_BATCHES
        or bound["p50_s"] < BOUND_MIN_P50_S
        or bound["total_s"] < BOUND_MIN_TOTAL_S
        or bound["total_s"] < BOUND_OVER_NEXT * following["total_s"]
    ):
        return []
    by_name = {row["operator"]: row for row in rows}
    held = [by_name[n] for n in _upstream(bound["operator"], by_name)]
    fused = [r for r in held if set(r["physical"]) & set(bound["physical"])]
    apart = [r for r in held if r not in fused]
    evidence = (
        f"{_udf(bound)} took {bound['p50_s']:.3f} s per batch (p50; p95 "
        f"{bound['p95_s']:.3f} s) over {bound['batches']} batches in {_workers(bound)}: "
        f"{bound['share']:.0%} of the pipeline's UDF time"
    )
    if apart:
        named = ", ".join(f"{r['operator']} ({r['p50_s']:.3f} s per batch)" for r in apart)
        evidence += (
            f"; upstream, {named} ran in operators of their own and were held back "
            "(backpressure): their output waited on this one"
        )
    if fused:
        evidence += "; fused with it (same tasks): " + ", ".join(r["operator"] for r in fused)
    if bound["compute"] == "actors":
        more = "a larger actor pool (compute=ray.data.ActorPoolStrategy(size=N))"
    else:
        more = "more tasks at once (concurrency=N, or fewer num_cpus per task)"
    return [
        Finding(
            f"{bound['operator']} bounds the pipeline: {bound['share']:.0%} of its UDF time, "
            f"{bound['p50_s']:.2f} s per batch",
            evidence,
            f"give {bound['operator']} {more}; a smaller batch_size if its batches are large; "
            f"or make {bound['function']} faster (raytrace-kit run --profile cprofile)",
            "data_bound",
            bound["function"] or bound["operator"],
            (Called(bound["function"] or bound["operator"], bound["batches"]),),
        )
    ]


def _upstream(name: str, by_name: dict[str, dict[str, Any]]) -> list[str]:
    found: list[str] = []
    todo = list(by_name[name]["inputs"])
    while todo:
        parent = todo.pop()
        if parent in by_name and parent not in found:
            found.append(parent)
            todo.extend(by_name[parent]["inputs"])
    return found[::-1]


def heavier_batch(op: dict[str, Any]) -> str | None:
    """Why an operator's slowest batch was heavier than the rest, or None: nothing says so.

    More rows or bytes in its block than the median batch's (``SKEW_HEAVIER`` times), or
    CPU time far beyond the median batch's time. A batch that only took longer (its
    process waited for a CPU on a busy machine, a pause, a slow read) is no skewed block.
    """
    slowest = op.get("slowest")
    if not slowest or not op["durations"]:
        return None
    _, cpu, rows, size = slowest
    for value, each, what in ((rows, op["batch_rows"], "rows"), (size, op["batch_bytes"], "bytes")):
        typical = statistics.median(each) if each else 0
        if value is not None and typical > 0 and value >= SKEW_HEAVIER * typical:
            return f"its block held {value / typical:.1f}x the median batch's {what}"
    p50 = statistics.median(op["durations"])
    if cpu is not None and cpu >= SKEW_RATIO * p50 and cpu - p50 >= SKEW_EXCESS_S / 2:
        ratio = cpu / max(p50, 1e-6)
        return f"it computed for {cpu:.2f} s of CPU, {ratio:.0f}x the median batch's time"
    return None


def skewed(rows: list[dict[str, Any]], heavier: dict[str, str | None]) -> list[Finding]:
    """An operator with a batch far slower than its median, and heavier (a skewed block)."""
    found = []
    for row in rows:
        p50, longest = row["p50_s"], row["max_s"]
        why = heavier.get(row["operator"])
        if (
            row["batches"] < SKEW_MIN_BATCHES
            or longest < SKEW_RATIO * p50
            or longest - p50 < SKEW_EXCESS_S
            or why is None
        ):
            continue
        found.append(Finding(
            f"A skewed batch in {row['operator']}: one took {longest:.2f} s, "
            f"{longest / max(p50, 1e-6):.0f}x its median {p50:.3f} s",
            f"{_udf(row)} ran {row['batches']} batches; the slowest held its task that long "
            f"while the others finished: {why}",
            "even out the blocks: ds.repartition(N) or a smaller batch_size before this "
            "operator; find the batch with raytrace-kit events --function "
            f"{(row['function'] or '').rsplit('.', 1)[-1]} --status ok",
            "data_skew", row["function"] or row["operator"],
        ))  # fmt: skip
    return found


def failing(rows: list[dict[str, Any]]) -> list[Finding]:
    """A UDF that fails on some of its batches, not all."""
    found = []
    for row in rows:
        if not row["failed"] or row["failed"] >= row["batches"]:
            continue
        errors = ", ".join(f"{name} x{count}" for name, count in row["errors"].items())
        found.append(Finding(
            f"{row['operator']}'s UDF fails on some batches: {row['failed']} of "
            f"{row['batches']} ({errors})",
            f"{_udf(row)} raised on some batches and not others: something in those rows "
            "(see the traceback and its frames' locals under Failures)",
            "handle the rows that raise in the UDF (or filter them out before it); "
            "DataContext.max_errored_blocks lets a pipeline go on past failed blocks",
            "data_failing", row["function"] or row["operator"],
        ))  # fmt: skip
    return found


# Generic findings whose evidence a Ray Data UDF's batches give without the problem: a
# batch is no task the user submitted (tiny, one at a time, queued), an actor pool's actor
# runs one batch at a time by design (concurrency= is the fix, not an ActorPool), a batch
# after a failed one in the same task is no retry, and the skew finding says stragglers.
_NOT_FOR_UDFS = frozenset(
    {"tiny_tasks", "one_at_a_time", "queued", "serializing_actor", "flaky_retries", "straggler"}
)


def data_explained(findings: list[Finding], udfs: set[str] | None = None) -> list[Finding]:
    """``findings`` less the generic ones that do not fit Ray Data's UDFs (``udfs``).

    A UDF's batches are calls, but not the user's submissions: the rules of tasks and
    actors the user runs step aside for them (see ``_NOT_FOR_UDFS``); a memory finding of
    its operator and "memory grows call after call" are one problem, said once.
    """
    udfs = udfs or set()
    grows = {f.subject for f in findings if f.kind == "data_memory"}
    return [
        f
        for f in findings
        if not (
            (f.kind in _NOT_FOR_UDFS and _of(f.subject, udfs))
            or (f.kind == "leak" and all(_of(name, grows) for name in f.subject.split(", ")))
        )
    ]


def data_section(rows: list[dict[str, Any]]) -> tuple[Any, ...]:
    """The report's table of the pipeline's operators (text and HTML alike)."""
    shown = []
    for row in rows:
        per_row = row["per_row"] and not row["batches"]
        failed = f" ({row['failed']} failed)" if row["failed"] else ""
        ran = f"{row['rows_in']:,} rows" if per_row else f"{row['batches']:,} batches{failed}"
        out = "?" if row["rows_out"] is None else f"{row['rows_out']:,}"
        if per_row:  # map keeps every row; filter and flat_map say nothing of theirs
            out = f"{row['rows_in']:,}" if row["method"] == "map" else "?"
        rows_text = f"{row['rows_in']:,} > {out}"
        growth = row["growth_p50_bytes"]
        times = (
            ("", "", "")
            if per_row
            else tuple(f"{row[key]:.3f}s" for key in ("p50_s", "p95_s", "max_s"))
        )
        shown.append((
            row["operator"], ran, rows_text, *times, f"{row['share']:.0%}",
            "" if growth is None else f"{growth / _MIB:+.1f}M",
            _workers(row) if row["tasks"] or row["actors"] else "",
        ))  # fmt: skip
    columns = ("operator", "ran", "rows", "p50", "p95", "max", "share", "mem/batch", "in")
    return "Ray Data operators (plan order)", columns, shown, []


def _of(function: str, udfs: set[str]) -> bool:
    """Whether ``function`` is one of ``udfs`` or a method of one (``Embed.__call__``)."""
    return function in udfs or function.rpartition(".")[0] in udfs
