"""A Ray Data pipeline's operators: each one's batches, time, rows and memory, and its findings.

The records come from two places (docs/ray-data.md says which figure is whose):

- the driver's ``data.operator`` events, one per operator a UDF was given to: its name as
  Ray Data gives it (``MapBatches(clean)``), its inputs (the plan's order), the UDF, the
  line that built it, tasks or actors;
- the UDF's calls (``call.end`` with an ``operator``): each batch's time, CPU, memory
  before and after, rows and bytes in and out, and the physical operator that ran it
  (``MapBatches(parse)->MapBatches(clean)`` when Ray Data fused the two); per-row UDFs'
  ``data.rows`` counts.

:class:`DataOps` takes both as the report streams over the files, merges with another's
(a cluster's nodes), and gives the report's section and findings.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call, DataSizes
from raytrace_kit._reports.run.data_findings import bound, failing, heavier_batch, memory, skewed
from raytrace_kit._reports.run.finding import Finding

__all__ = ["DataOps"]

_MIB = 2**20
_MARK = b'"event":"data.'
_SPACED = b'"event": "data.'


class _Event(msgspec.Struct):
    event: str = ""
    timestamp: str = ""
    operator: str | None = None
    inputs: list[str] = []
    function: str | None = None
    method: str | None = None
    compute: str | None = None
    per_row: bool = False
    batch_size: int | str | None = None
    site: str | None = None
    op: str | None = None
    rows: int = 0
    duration_s: float = 0.0


_DECODE = msgspec.json.Decoder(_Event).decode


def _operator() -> dict[str, Any]:
    return {
        "planned": None, "function": None, "inputs": [], "method": None, "compute": None,
        "per_row": False, "batch_size": None, "site": None, "batches": 0, "failed": 0,
        "errors": {}, "durations": [], "rows_in": 0, "rows_out": 0, "bytes_in": 0,
        "bytes_out": 0, "growth": [], "workers": set(), "physical": set(), "inits": 0,
        "rows": 0, "rows_s": 0.0, "grown": [], "sized_out": 0, "called": set(),
        "batch_rows": [], "batch_bytes": [], "slowest": None,
    }  # fmt: skip


class DataOps:
    """The operators of the run's Ray Data pipelines, as their records say."""

    def __init__(self, since: str | None = None, until: str | None = None) -> None:
        self.since, self.until = since, until
        self.operators: dict[str, dict[str, Any]] = {}

    def _of(self, name: str) -> dict[str, Any]:
        found = self.operators.get(name)
        if found is None:
            found = self.operators[name] = _operator()
        return found

    def event(self, raw: bytes) -> None:
        """Take one line that is not a call's (``data.operator``, ``data.rows``; others pass)."""
        head = raw[:120]
        if _MARK not in head and _SPACED not in head:  # the kit's spacing, or another's
            return
        try:
            event = _DECODE(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if event.operator is None:
            return
        op = self._of(event.operator)
        if event.event == "data.operator":
            op["planned"] = event.timestamp
            op.update(function=event.function, inputs=list(event.inputs), method=event.method)
            op.update(compute=event.compute, per_row=event.per_row, site=event.site)
            op["batch_size"] = event.batch_size
        elif event.event == "data.rows" and self._within(event.timestamp):
            op["rows"] += event.rows
            op["rows_s"] += event.duration_s
            op["function"] = op["function"] or event.function
            if event.op:
                op["physical"].add(event.op)

    def _within(self, stamp: str) -> bool:
        return not ((self.since and stamp < self.since) or (self.until and stamp >= self.until))

    def calls(self, calls: Iterator[Call]) -> Iterator[Call]:
        """``calls`` as they are, the Ray Data UDFs' among them taken in on the way."""
        series: dict[str, list[int]] = {}  # this process's RSS after each batch, per operator
        for call in calls:
            if call.operator is not None and self._within(call.started or call.ended or ""):
                self._take(call, series)
            yield call
        for name, grown in series.items():
            if len(grown) >= 2:
                self.operators[name]["grown"].append(grown)

    def _take(self, call: Call, series: dict[str, list[int]]) -> None:
        op = self._of(call.operator or "")
        op["function"] = op["function"] or call.function
        op["called"].add(call.function)
        if call.kind == "actor_init":
            op["inits"] += 1
            return
        op["batches"] += 1
        if call.status == "error":
            op["failed"] += 1
            errors = op["errors"]
            errors[call.error_type or "?"] = errors.get(call.error_type or "?", 0) + 1
        sizes = call.data
        if call.duration_s is not None:
            op["durations"].append(call.duration_s)
            if op["slowest"] is None or call.duration_s > op["slowest"][0]:
                cpu = call.process_cpu_s if call.process_cpu_s is not None else call.cpu_s
                rows, size = (sizes.rows_in, sizes.bytes_in) if sizes is not None else (None, None)
                op["slowest"] = [call.duration_s, cpu, rows, size]
        if call.actor_id:
            op["workers"].add("actor:" + call.actor_id)
        elif call.task_id:
            op["workers"].add("task:" + call.task_id)
        if call.rss_start_bytes is not None and call.rss_end_bytes is not None:
            op["growth"].append(call.rss_end_bytes - call.rss_start_bytes)
            series.setdefault(call.operator or "", []).append(call.rss_end_bytes)
        if sizes is not None:
            _take_sizes(op, sizes)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """As plain data, to merge elsewhere (a node's part of a cluster's report)."""
        return {
            name: {
                **op,
                "workers": sorted(op["workers"]),
                "physical": sorted(op["physical"]),
                "called": sorted(op["called"]),
            }
            for name, op in self.operators.items()
        }

    @classmethod
    def merged(cls, parts: Iterable[dict[str, dict[str, Any]]]) -> DataOps:
        """The sum of several nodes' :meth:`to_dict`."""
        merged = cls()
        for part in parts:
            for name, op in part.items():
                mine = merged._of(name)
                for key in ("batches", "failed", "rows_in", "rows_out", "bytes_in",
                            "bytes_out", "inits", "rows", "rows_s", "sized_out"):  # fmt: skip
                    mine[key] += op[key]
                for key in ("durations", "growth", "grown", "batch_rows", "batch_bytes"):
                    mine[key].extend(op[key])
                slowest = op["slowest"]
                if slowest is not None and (
                    mine["slowest"] is None or slowest[0] > mine["slowest"][0]
                ):
                    mine["slowest"] = slowest
                mine["workers"].update(op["workers"])
                mine["physical"].update(op["physical"])
                mine["called"].update(op["called"])
                for error, count in op["errors"].items():
                    mine["errors"][error] = mine["errors"].get(error, 0) + count
                if op["planned"] is not None:
                    for key in ("planned", "function", "inputs", "method", "compute",
                                "per_row", "batch_size", "site"):  # fmt: skip
                        mine[key] = op[key]
                mine["function"] = mine["function"] or op["function"]
        return merged

    def udfs(self) -> set[str]:
        """The functions of every UDF: as planned (a class's name) and as called (methods)."""
        found = {op["function"] for op in self.operators.values() if op["function"]}
        for op in self.operators.values():
            found.update(op["called"])
        return found

    def _order(self) -> list[str]:
        """The operators in plan order: each after its inputs, then as they were built."""
        names = sorted(self.operators, key=lambda n: (self.operators[n]["planned"] or "~", n))
        placed: list[str] = []
        seen: set[str] = set()

        def place(name: str, path: frozenset[str]) -> None:
            if name in seen or name in path or name not in self.operators:
                return
            for parent in self.operators[name]["inputs"]:
                place(parent, path | {name})
            seen.add(name)
            placed.append(name)

        for name in names:
            place(name, frozenset())
        return placed

    def rows(self) -> list[dict[str, Any]]:
        """The report's section: one row per operator that ran, in plan order."""
        ran = [
            n for n in self._order() if self.operators[n]["batches"] or self.operators[n]["rows"]
        ]
        total = sum(_busy(self.operators[n]) for n in ran) or 1.0
        shown = []
        for name in ran:
            op = self.operators[name]
            durations = sorted(op["durations"])
            shown.append({
                "operator": name, "function": op["function"], "method": op["method"],
                "compute": op["compute"], "per_row": op["per_row"], "site": op["site"],
                "batch_size": op["batch_size"], "inputs": op["inputs"],
                "physical": sorted(op["physical"]), "batches": op["batches"],
                "failed": op["failed"], "errors": dict(sorted(op["errors"].items())),
                "rows_in": op["rows_in"] if op["batches"] else op["rows"],
                "rows_out": op["rows_out"] if op["sized_out"] else None,
                "bytes_in": op["bytes_in"],
                "bytes_out": op["bytes_out"],
                "p50_s": _quantile(durations, 0.5), "p95_s": _quantile(durations, 0.95),
                "max_s": durations[-1] if durations else 0.0,
                "total_s": round(_busy(op), 6), "share": round(_busy(op) / total, 4),
                "growth_p50_bytes": int(statistics.median(op["growth"])) if op["growth"] else None,
                "tasks": sum(w.startswith("task:") for w in op["workers"]),
                "actors": sum(w.startswith("actor:") for w in op["workers"]),
                "actors_started": op["inits"],
            })  # fmt: skip
        return shown

    def findings(self) -> list[Finding]:
        """The bound and what it holds back, memory that grows, a skewed batch, failures."""
        rows = self.rows()
        grown = {name: op["grown"] for name, op in self.operators.items()}
        heavier = {name: heavier_batch(op) for name, op in self.operators.items()}
        return [*bound(rows), *memory(rows, grown), *skewed(rows, heavier), *failing(rows)]


def _take_sizes(op: dict[str, Any], sizes: DataSizes) -> None:
    """A batch's rows and bytes in and out, and the physical operator that ran it."""
    if sizes.rows_in is not None:
        op["batch_rows"].append(sizes.rows_in)
    if sizes.bytes_in is not None:
        op["batch_bytes"].append(sizes.bytes_in)
    if sizes.op:
        op["physical"].add(sizes.op)
    for key in ("rows_in", "rows_out", "bytes_in", "bytes_out"):
        value = getattr(sizes, key)
        if value is not None:
            op[key] += value
    if sizes.rows_out is not None:
        op["sized_out"] += 1


def _busy(op: dict[str, Any]) -> float:
    return float(sum(op["durations"])) + float(op["rows_s"])


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 6)
