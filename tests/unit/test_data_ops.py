"""The Ray Data section of the report: operators from their calls, merged, and judged.

Pure: calls are built as the report decodes them (``schema.Call``), events as the driver
writes them; each finding on rows with its evidence, and silent on rows without it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from raytrace_kit._output.schema import Call, DataSizes
from raytrace_kit._reports.run import (
    BOUND_MIN_P50_S,
    GROWTH_MIN_BYTES,
    DataOps,
    Finding,
    data_explained,
    data_section,
)

MIB = 2**20


def _planned(operator: str, inputs: list[str], function: str, compute: str = "tasks") -> bytes:
    return json.dumps({
        "timestamp": "2026-12-01T10:00:00.000000+00:00", "level": "info",
        "event": "data.operator", "schema": 2, "operator": operator, "inputs": inputs,
        "function": function, "method": "map_batches", "compute": compute, "per_row": False,
        "batch_size": None, "site": "app.py:12",
    }).encode()  # fmt: skip


def _batch(operator: str, function: str, n: int, seconds: float, **more: Any) -> Call:
    rss = more.pop("rss", (100 * MIB, 100 * MIB))
    return Call(
        call_id=f"{operator}-{n}", function=function, kind=more.pop("kind", "task"),
        status=more.pop("status", "ok"), error_type=more.pop("error_type", None),
        started=f"2026-12-01T10:00:{n % 60:02d}.000000+00:00",
        ended=f"2026-12-01T10:00:{n % 60:02d}.500000+00:00", duration_s=seconds,
        task_id=more.pop("task_id", f"t{n}"), actor_id=more.pop("actor_id", None),
        rss_start_bytes=rss[0], rss_end_bytes=rss[1], operator=operator,
        data=DataSizes(op=more.pop("op", operator), rows_in=more.pop("rows", 10),
                       bytes_in=more.pop("bytes", 80), rows_out=10, bytes_out=80),
        cpu_s=more.pop("cpu", None),
    )  # fmt: skip


def _ops(calls: list[Call], planned: list[bytes]) -> DataOps:
    ops = DataOps()
    for line in planned:
        ops.event(line)
    for _ in ops.calls(iter(calls)):
        pass
    return ops


_PLAN = [
    _planned("MapBatches(clean)", ["ReadRange"], "app.clean"),
    _planned("MapBatches(score)", ["MapBatches(clean)"], "app.score"),
]


def _pipeline(slow: float = 0.2, batches: int = 16) -> list[Call]:
    return [
        *(_batch("MapBatches(clean)", "app.clean", i, 0.001) for i in range(batches)),
        *(_batch("MapBatches(score)", "app.score", i, slow) for i in range(batches)),
    ]


class TestRows:
    def test_in_plan_order_with_sizes_and_times(self) -> None:
        rows = _ops(_pipeline(), list(reversed(_PLAN))).rows()
        assert [r["operator"] for r in rows] == ["MapBatches(clean)", "MapBatches(score)"]
        score = rows[1]
        assert (score["batches"], score["rows_in"], score["rows_out"]) == (16, 160, 160)
        assert score["p50_s"] == 0.2
        assert score["share"] > 0.99
        assert (score["tasks"], score["actors"]) == (16, 0)

    def test_merged_parts_make_the_one_pass_rows(self) -> None:
        calls = _pipeline()
        whole = _ops(calls, _PLAN)
        halves = [_ops(calls[::2], _PLAN[:1]), _ops(calls[1::2], _PLAN[1:])]
        merged = DataOps.merged(json.loads(json.dumps(h.to_dict())) for h in halves)
        assert merged.rows() == whole.rows()
        assert [f.title for f in merged.findings()] == [f.title for f in whole.findings()]

    def test_the_table_says_rows_out_unknown_as_such(self) -> None:
        call = _batch("MapBatches(a)", "app.a", 1, 0.1)
        call.data = DataSizes(rows_in=5)
        (row,) = data_section(_ops([call], []).rows())[2]
        assert row[2] == "5 > ?"


class TestBound:
    def test_the_slow_stage_bounds_and_holds_back_the_one_before(self) -> None:
        (found,) = _ops(_pipeline(), _PLAN).findings()
        assert found.kind == "data_bound"
        assert found.subject == "app.score"
        assert "MapBatches(clean) (0.001 s per batch) ran in operators of their own" in (
            found.evidence
        )
        assert "built at app.py:12" in found.evidence

    def test_a_fused_stage_is_named_fused_not_held_back(self) -> None:
        fused = "ReadRange->MapBatches(clean)->MapBatches(score)"
        calls = [
            *(_batch("MapBatches(clean)", "app.clean", i, 0.001, op=fused) for i in range(16)),
            *(_batch("MapBatches(score)", "app.score", i, 0.2, op=fused) for i in range(16)),
        ]
        (found,) = _ops(calls, _PLAN).findings()
        assert "fused with it (same tasks): MapBatches(clean)" in found.evidence
        assert "held back" not in found.evidence

    def test_silent_without_its_evidence(self) -> None:
        assert _ops(_pipeline(slow=BOUND_MIN_P50_S / 2, batches=100), _PLAN).findings() == []
        assert _ops(_pipeline(batches=3), _PLAN).findings() == []  # too few batches
        even = [*_pipeline(slow=0.2), *(_batch("MapBatches(clean)", "app.clean", 99 + i, 0.2)
                                        for i in range(16))]  # fmt: skip
        assert _ops(even, _PLAN).findings() == []  # two stages of one weight: no bound
        assert _ops(_pipeline()[16:], _PLAN[1:]).findings() == []  # one stage: nothing to bound


class TestMemory:
    def _kept(self, step: int, batches: int = 4) -> list[Call]:
        return [
            _batch("MapBatches(Embed)", "app.Embed.__call__", i, 0.01, kind="actor_method",
                   actor_id="a1", rss=(200 * MIB + i * step, 200 * MIB + (i + 1) * step))
            for i in range(batches)
        ]  # fmt: skip

    def test_batches_that_keep_their_memory_are_named(self) -> None:
        plan = [_planned("MapBatches(Embed)", ["ReadRange"], "app.Embed", "actors")]
        (found,) = _ops(self._kept(150 * MIB), plan).findings()
        assert found.kind == "data_memory"
        assert "+450 MiB over 4 batches in one process (150 MiB per batch)" in found.title

    def test_silent_below_the_growth_or_once_it_stops(self) -> None:
        assert _ops(self._kept(GROWTH_MIN_BYTES // 8), []).findings() == []
        plateau = self._kept(150 * MIB, 2) + [
            _batch("MapBatches(Embed)", "app.Embed.__call__", 10 + i, 0.01, actor_id="a1",
                   rss=(500 * MIB, 500 * MIB)) for i in range(4)
        ]  # fmt: skip
        assert _ops(plateau, []).findings() == []  # grew at first, then flat: a model loaded

    def test_the_leak_finding_of_the_same_udf_is_said_once(self) -> None:
        memory = Finding("m", "e", "f", "data_memory", "app.Embed")
        leak = Finding("Memory grows call after call", "e", "f", "leak", "app.Embed.__call__")
        other = Finding("Memory grows call after call", "e", "f", "leak", "app.other")
        assert data_explained([memory, leak, other]) == [memory, other]
        assert data_explained([leak]) == [leak]  # no data finding: the leak stays


class TestSkewAndFailures:
    def test_one_batch_far_slower_than_the_median(self) -> None:
        """Its block held ten times the rows: a skewed block, said with the reason."""
        calls = [_batch("MapBatches(e)", "app.e", i, 0.01) for i in range(9)]
        calls.append(_batch("MapBatches(e)", "app.e", 9, 1.5, rows=100, bytes=800))
        (found,) = _ops(calls, []).findings()
        assert found.kind == "data_skew"
        assert found.title.startswith("A skewed batch in MapBatches(e): one took 1.50 s")
        assert found.evidence.endswith("its block held 10.0x the median batch's rows")

    def test_a_batch_that_computed_far_longer(self) -> None:
        """Rows alike, but its CPU time far beyond the others' time: heavier rows."""
        calls = [_batch("MapBatches(e)", "app.e", i, 0.01, cpu=0.009) for i in range(9)]
        calls.append(_batch("MapBatches(e)", "app.e", 9, 1.5, cpu=1.45))
        (found,) = _ops(calls, []).findings()
        assert found.evidence.endswith(
            "it computed for 1.45 s of CPU, 145x the median batch's time"
        )

    @pytest.mark.parametrize("cpu", [None, 0.01], ids=["cpu unknown", "cpu as the others"])
    def test_a_batch_that_only_took_longer_is_no_skew(self, cpu: float | None) -> None:
        """Same rows, same bytes, no more CPU: it waited (a busy machine), its block is even."""
        calls = [_batch("MapBatches(e)", "app.e", i, 0.01, cpu=0.009) for i in range(9)]
        calls.append(_batch("MapBatches(e)", "app.e", 9, 1.5, cpu=cpu))
        assert _ops(calls, []).findings() == []

    def test_some_batches_failing_not_all(self) -> None:
        calls = [_batch("MapBatches(p)", "app.p", i, 0.01) for i in range(8)]
        calls += [_batch("MapBatches(p)", "app.p", 8 + i, 0.01, status="error",
                         error_type="ValueError") for i in range(2)]  # fmt: skip
        (found,) = _ops(calls, []).findings()
        assert found.title == "MapBatches(p)'s UDF fails on some batches: 2 of 10 (ValueError x2)"
        every = [_batch("MapBatches(p)", "app.p", i, 0.01, status="error", error_type="E")
                 for i in range(3)]  # fmt: skip
        assert _ops(every, []).findings() == []  # all fail: the failures section says it


class TestGenericFindingsStepAside:
    def test_rules_of_submitted_tasks_do_not_judge_udf_batches(self) -> None:
        tiny = Finding("Tasks too small", "e", "f", "tiny_tasks", "app.add_one")
        serial = Finding("One actor serializes the work", "e", "f", "serializing_actor",
                         "app.Hoarder")  # fmt: skip
        retried = Finding("Retries hide flaky functions", "e", "f", "flaky_retries",
                          "app.Hoarder.__call__")  # fmt: skip
        users = Finding("Tasks too small", "e", "f", "tiny_tasks", "app.score")
        udfs = {"app.add_one", "app.Hoarder"}
        assert data_explained([tiny, serial, retried, users], udfs) == [users]

    def test_the_udfs_are_named_as_planned_and_as_called(self) -> None:
        plan = [_planned("MapBatches(Embed)", ["ReadRange"], "app.Embed", "actors")]
        call = _batch("MapBatches(Embed)", "app.Embed.__call__", 1, 0.01, kind="actor_method")
        assert _ops([call], plan).udfs() == {"app.Embed", "app.Embed.__call__"}
