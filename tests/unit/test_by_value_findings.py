"""The findings of large data passed by value (``_reports.run.by_value``), from written records.

The ``call.submit`` lines are rendered by the writer's own functions, as a driver and a
worker write them, on two nodes; the report of the files and the cluster's merged report
must find the same (no Ray).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import raytrace_kit
from raytrace_kit._output import submissions
from raytrace_kit._process import ProcessIdentity
from raytrace_kit._reports.cluster import NodeReport, cluster_report
from raytrace_kit._reports.run import COPIED_MIN_BYTES, ByValue, size_text

MIB = 2**20
BASE = 1_800_000_000.0
NODES = ("ab" * 28, "cd" * 28)


def _task(n: int) -> str:
    return f"{n:016x}" + "e" * 24 + "01000000"


class _Writer:
    """One process's event file: its submissions, numbered tasks."""

    def __init__(self, root: Path, node: str, pid: int, *, worker: bool) -> None:
        self.identity = ProcessIdentity("01000000", node, f"{pid:056x}", pid, is_worker=worker)
        self.parent = "0123456789abcdef/" + "ff" * 24 if worker else None
        self.path = root / f"node-{node[:12]}" / f"events-{node[:12]}-{pid}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lines: list[bytes] = []

    def submit(
        self, n: int, function: str, site: str, large: list[list[Any]] | None,
        code_bytes: int | None = None,
    ) -> None:  # fmt: skip
        prefix = submissions.submit_prefix(
            function, "task", {"CPU": 1.0}, None, code_bytes=code_bytes
        )
        self.lines.append(submissions.submit_line(
            BASE + n / 100, prefix, _task(n), None, self.parent, self.identity, site, None, large,
        ))  # fmt: skip

    def close(self) -> None:
        self.path.write_bytes(b"".join(self.lines))


def _write_run(root: Path) -> None:
    """The driver on node 0, a worker on node 1: the bugs, and what looks like them."""
    driver = _Writer(root, NODES[0], 100, worker=False)
    n = 0
    for _ in range(10):  # the bug: one 20 MiB array, ten calls
        driver.submit(n, "app.score_chunk", "/app/app.py:12", [[0, 20 * MIB, 7, "numpy.ndarray"]])
        n += 1
    for k in range(10):  # partitioning: a different array each call
        driver.submit(n, "app.part", "/app/app.py:20", [[0, 20 * MIB, 100 + k, "numpy.ndarray"]])
        n += 1
    for _ in range(100):  # the same 1 MiB, 100 times: 99 MiB copied again, under the bar
        driver.submit(n, "app.small", "/app/app.py:30", [["table", MIB, 8, "pyarrow.Table"]])
        n += 1
    for _ in range(5):  # bytes: no serial, never "the same object"
        driver.submit(n, "app.blob", "/app/app.py:40", [[0, 50 * MIB, None, "bytes"]])
        n += 1
    for _ in range(3):  # a large function, and a small one (1 MiB, below Ray's warning)
        driver.submit(n, "app.closure", "/app/app.py:50", None, code_bytes=20 * MIB)
        driver.submit(n + 1000, "app.mild", "/app/app.py:60", None, code_bytes=2 * MIB)
        n += 1
    driver.close()
    worker = _Writer(root, NODES[1], 300, worker=True)
    for k in range(3):  # a worker's call passes one 50 MiB frame twice to each of 3 calls
        entry = [[0, 50 * MIB, 1, "pandas.DataFrame"], ["again", 50 * MIB, 1, "pandas.DataFrame"]]
        fit = k < 2
        worker.submit(
            5000 + k, "app.fit" if fit else "app.score", f"/app/app.py:{70 if fit else 72}", entry
        )
    worker.close()


def _ask(readers: list[NodeReport]) -> Any:
    def ask(method: str, arguments: list[tuple[Any, ...]]) -> list[Any]:
        answers = [getattr(r, method)(*a) for r, a in zip(readers, arguments, strict=True)]
        pickle.dumps(answers)  # what travels from node to node must pickle
        return answers

    return ask


def _ours(report: raytrace_kit.Report) -> list[Any]:
    return [f for f in report.findings if f.kind in {"passed_by_value", "large_function"}]


class TestFindings:
    """Which records make a finding, and what it says."""

    def test_the_same_array_to_many_calls(self, tmp_path: Path) -> None:
        """Named with its size, its calls' function and line, the copies and their bytes."""
        _write_run(tmp_path)
        found = _ours(raytrace_kit.report(tmp_path))
        passed = [f for f in found if f.kind == "passed_by_value"]
        # The most bytes stored first: the frame's 300 MiB, then the array's 200 MiB.
        assert [f.subject for f in passed] == ["app.fit", "app.score_chunk"]
        first = passed[1]
        assert first.title == (
            "The same 20 MiB numpy.ndarray was passed by value to 10 calls of "
            "app.score_chunk at /app/app.py:12: Ray stored 10 copies (200 MiB); ray.put it "
            "once and pass the ref"
        )
        assert first.evidence.startswith(
            "the driver passed one 20 MiB numpy.ndarray (argument 0), the same live object "
            "each time, to 10 calls: "
        )
        assert "9 of the 10 copies (180 MiB) held data stored already" in first.evidence
        assert "ray.put(x)" in first.fix
        assert [(c.function, c.calls) for c in first.functions] == [("app.score_chunk", 10)]

    def test_an_object_passed_at_several_lines(self, tmp_path: Path) -> None:
        """One frame, twice to each of 3 calls of two functions: 3 calls, 6 copies."""
        _write_run(tmp_path)
        (fit,) = [f for f in _ours(raytrace_kit.report(tmp_path)) if f.subject == "app.fit"]
        assert fit.title == (
            "The same 50 MiB pandas.DataFrame was passed by value to 3 calls (2 of app.fit "
            "at /app/app.py:70, 1 of app.score at /app/app.py:72): Ray stored 6 copies "
            "(300 MiB); ray.put it once and pass the ref"
        )
        assert fit.evidence.startswith("a worker's call (pid 300) passed one 50 MiB pandas")
        assert "(argument 0)" in fit.evidence  # where it was first seen

    def test_partitioned_small_and_unknown_objects_are_no_finding(self, tmp_path: Path) -> None:
        """A different array per call, 99 MiB copied again, bytes (no serial): silent."""
        _write_run(tmp_path)
        subjects = {f.subject for f in _ours(raytrace_kit.report(tmp_path))}
        assert not subjects & {"app.part", "app.small", "app.blob", "app.mild"}

    def test_a_large_remote_function(self, tmp_path: Path) -> None:
        """20 MiB pickled: named with its size; 2 MiB (below Ray's warning) is not."""
        _write_run(tmp_path)
        (code,) = [f for f in _ours(raytrace_kit.report(tmp_path)) if f.kind == "large_function"]
        assert code.title == (
            "The remote function app.closure captures 20 MiB (its closure or the globals it "
            "uses), which Ray ships to every worker that runs it"
        )
        assert "(3 calls recorded)" in code.evidence

    def test_the_cluster_report_finds_the_same(self, tmp_path: Path) -> None:
        """Each node counts its own processes' objects; merged, the findings are the same."""
        _write_run(tmp_path)
        whole = _ours(raytrace_kit.report(tmp_path))
        readers = [NodeReport([tmp_path / f"node-{n[:12]}"]) for n in NODES]
        merged = cluster_report(_ask(readers), 2, since=None, until=None, source="cluster")
        assert _ours(merged) == whole
        assert len(whole) == 3

    def test_the_report_window(self, tmp_path: Path) -> None:
        """--since after the loop: its calls are outside, and so is its finding."""
        _write_run(tmp_path)
        made = raytrace_kit.report(tmp_path, since="2027-01-15T08:00:00.150000+00:00")
        assert "app.score_chunk" not in {f.subject for f in _ours(made)}


class TestRule:
    """The thresholds, at their edges."""

    @pytest.mark.parametrize(
        ("calls", "size", "found"),
        [
            (1, 10 * 2**30, False),  # one call: nothing to save
            (2, COPIED_MIN_BYTES, True),  # one copy too many, of 100 MiB
            (2, COPIED_MIN_BYTES - 1, False),
            (101, MIB, True),  # 100 copies of a MiB again
            (100, MIB, False),
        ],
    )
    def test_copies_beyond_the_first(self, calls: int, size: int, found: bool) -> None:
        """The bytes copied beyond the first copy decide, from two calls on."""
        passed = ByValue()
        for k in range(calls):
            line = submissions.submit_line(
                BASE, submissions.submit_prefix("m.f", "task", {}, None), _task(k), None, None,
                ProcessIdentity(None, None, None, 1, is_worker=False), None, None,
                [[0, size, 1, "numpy.ndarray"]],
            )  # fmt: skip
            from raytrace_kit._reports.reading import decode_submission  # noqa: PLC0415

            passed.take(decode_submission(line), line)
        assert bool(passed.findings()) is found

    @pytest.mark.parametrize(
        ("count", "text"),
        [(MIB, "1.0 MiB"), (3 * MIB // 2, "1.5 MiB"), (20 * MIB, "20 MiB"),
         (9500 * MIB, "9.3 GiB")],
    )  # fmt: skip
    def test_size_text(self, count: int, text: str) -> None:
        """Sizes as the titles say them."""
        assert size_text(count) == text
