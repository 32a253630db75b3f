"""Large data passed by value, found in real runs: the bug, and the same program fixed.

The programs run as users run them, under ``raytrace-kit run`` (a real subprocess attached
to the session's shared Ray), and the report is read as a user reads it
(``raytrace-kit report --json``). A decorated function and a debuggable actor's method go
through the same probe at ``.remote()``: checked in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy
import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers

pytestmark = pytest.mark.usefixtures("ray_session")

MIB = 2**20

# The bug of issue 41: one array, ~20 MiB, passed by value to each call of a loop.
_PASSED = """\
import os, numpy, ray

@ray.remote
def score_chunk(data, i):
    return float(data[i])

ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
data = numpy.ones(20 * 2**20 // 8)
print(sum(ray.get([score_chunk.remote(data, i) for i in range(10)])))
"""
# Fixed as the finding says: put once, pass the ref.
_PASSED_FIXED = _PASSED.replace(
    "print(sum(ray.get([score_chunk.remote(data, i)",
    "ref = ray.put(data)\nprint(sum(ray.get([score_chunk.remote(ref, i)",
)
# Normal partitioning: a different array for each call (the same size: CPython may give
# each new array the last one's address).
_PARTITIONED = _PASSED.replace(
    "score_chunk.remote(data, i)", "score_chunk.remote(numpy.full(20 * 2**20 // 8, i), i)"
)

# A remote function whose globals hold ~20 MiB, shipped to every worker that runs it.
_CAPTURED = """\
import os, numpy, ray

TABLE = numpy.ones(20 * 2**20 // 8)

@ray.remote
def lookup(i):
    return float(TABLE[i])

ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
print(sum(ray.get([lookup.remote(i) for i in range(4)])))
"""
_CAPTURED_FIXED = """\
import os, numpy, ray

TABLE = numpy.ones(20 * 2**20 // 8)

@ray.remote
def lookup(table, i):
    return float(table[i])

ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
ref = ray.put(TABLE)
print(sum(ray.get([lookup.remote(ref, i) for i in range(4)])))
"""


def _line_of(program: str, text: str) -> int:
    (number,) = [n for n, line in enumerate(program.splitlines(), 1) if text in line]
    return number


def _findings_of_run(tmp_path: Path, program: str, kind: str) -> list[dict[str, Any]]:
    """Run ``program`` under ``raytrace-kit run``, then the report's findings of ``kind``.

    Only those about this program: the session (and its log directory) is shared.
    """
    script = tmp_path / "app.py"
    script.write_text(program)
    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "run", script.name],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        env={**os.environ, "RAY_ADDRESS": address},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = helpers.run_cli(
        "report", str(raytrace_kit.log_dir()), "--json", "--since", helpers.window_start()
    )
    assert shown.returncode == 0, shown.stderr
    findings = json.loads(shown.stdout)["findings"]
    return [
        f for f in findings
        if f["kind"] == kind and (str(script) in f["title"] or "__main__." in f["subject"])
    ]  # fmt: skip


class TestPassedByValue:
    """The same array to every call of a loop: named; put once, or one array per call: not."""

    def test_the_bug_is_named_with_its_line_count_and_sizes(self, tmp_path: Path) -> None:
        (found,) = _findings_of_run(tmp_path, _PASSED, "passed_by_value")
        site = f"{tmp_path / 'app.py'}:{_line_of(_PASSED, 'score_chunk.remote(')}"
        assert found["title"] == (
            "The same 20 MiB numpy.ndarray was passed by value to 10 calls of "
            f"__main__.score_chunk at {site}: Ray stored 10 copies (200 MiB); ray.put it "
            "once and pass the ref"
        )
        assert found["evidence"].startswith("the driver passed one 20 MiB numpy.ndarray")
        assert "ray.put(x)" in found["fix"]

    def test_the_fixed_program_has_no_finding(self, tmp_path: Path) -> None:
        assert _findings_of_run(tmp_path, _PASSED_FIXED, "passed_by_value") == []

    def test_one_array_per_call_is_no_finding(self, tmp_path: Path) -> None:
        assert _findings_of_run(tmp_path, _PARTITIONED, "passed_by_value") == []


class TestLargeFunction:
    """A remote function that captures an array in its globals: named; passed as a ref: not."""

    def test_the_bug_is_named_with_its_size(self, tmp_path: Path) -> None:
        (found,) = _findings_of_run(tmp_path, _CAPTURED, "large_function")
        assert found["title"] == (
            "The remote function __main__.lookup captures 20 MiB (its closure or the globals "
            "it uses), which Ray ships to every worker that runs it"
        )
        assert "(4 calls recorded)" in found["evidence"]

    def test_the_fixed_program_has_no_finding(self, tmp_path: Path) -> None:
        assert _findings_of_run(tmp_path, _CAPTURED_FIXED, "large_function") == []


@debuggable
@ray.remote
def _total(data: Any, i: int) -> float:
    return float(data[i])


@debuggable
@ray.remote
class _Scorer:
    def score(self, data: Any, i: int) -> float:
        return float(data[i])


def _report_here(function: Any, calls: int) -> raytrace_kit.Report:
    """The report of this test's events, once ``calls`` submissions of ``function`` are written."""
    helpers.wait_until(
        lambda: len(helpers.events_of(function, "call.submit")) >= calls, "the submissions"
    )
    return raytrace_kit.report(raytrace_kit.log_dir(), since=helpers.window_start())


class TestDecorated:
    """``@debuggable`` functions and actors' methods: the same probe, the same finding."""

    def test_a_decorated_function(self) -> None:
        data = numpy.ones(12 * MIB // 8)
        ray.get([_total.remote(data, i) for i in range(10)])
        (submit, *_) = helpers.events_of(_total, "call.submit")
        assert submit["large_args"][0][:2] == [0, 12 * MIB]
        assert submit["large_args"][0][3] == "numpy.ndarray"
        found = [f for f in _report_here(_total, 10).findings if f.kind == "passed_by_value"]
        (finding,) = [f for f in found if f.subject.endswith("_total")]
        assert "The same 12 MiB numpy.ndarray was passed by value to 10 calls of " in (
            finding.title
        )
        assert "Ray stored 10 copies (120 MiB)" in finding.title

    def test_an_actors_method(self) -> None:
        scorer = _Scorer.remote()
        data = numpy.ones(12 * MIB // 8)
        ray.get([scorer.score.remote(data, i) for i in range(10)])
        found = [
            f for f in _report_here(_Scorer, 11).findings if f.kind == "passed_by_value"
        ]  # fmt: skip
        (finding,) = [f for f in found if f.subject.endswith("_Scorer.score")]
        assert "passed by value to 10 calls of " in finding.title

    def test_small_arguments_and_refs_add_nothing(self) -> None:
        ref = ray.put(numpy.ones(12 * MIB // 8))
        ray.get([_total.remote(ref, i) for i in range(3)] + [_total.remote([1, 2], 0)])
        helpers.wait_until(
            lambda: len(helpers.events_of(_total, "call.submit")) >= 4, "the submissions"
        )
        assert all("large_args" not in e for e in helpers.events_of(_total, "call.submit"))
