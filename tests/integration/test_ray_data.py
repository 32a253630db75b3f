"""Integration: Ray Data pipelines under ``raytrace-kit run``, as users write them.

Each program in ``tests/programs/data`` runs as a user runs it: a real subprocess, on a
Ray of its own (``ray.init(num_cpus=2)`` in the program, under a temp dir of its own, so
only its records are in its session); the tests read what a user reads: the program's
output, ``raytrace-kit report --json``, ``stuck --json`` and ``top --once --json``
mid-run, the events. Nothing here depends on timing: the slow stage sleeps 0.2 s per
batch against stages of microseconds, the blocked UDF waits until the test says go.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import helpers

PROGRAMS = Path(__file__).parent.parent / "programs" / "data"
TIMEOUT_S = 240.0


@pytest.fixture
def temp() -> Iterator[Path]:
    # Short, under /tmp: Ray's socket paths in it must stay under 108 bytes.
    made = Path(tempfile.mkdtemp(prefix="rtk-data-", dir="/tmp"))
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _env(temp: Path, **more: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_ADDRESS")}
    env["RAY_TMPDIR"] = str(temp)  # its own session directory: only its records there
    env.update(more)
    return env


def _run(
    temp: Path, name: str, *args: str, kit: bool = True, options: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "raytrace_kit", "run", *options] if kit else [sys.executable]
    return subprocess.run(
        [*command, str(PROGRAMS / f"{name}.py"), *args],
        cwd=PROGRAMS, env=_env(temp), capture_output=True, text=True, timeout=TIMEOUT_S,
        check=False,
    )  # fmt: skip


def _session(temp: Path) -> Path:
    return (temp / "ray" / "session_latest").resolve()


def _report(temp: Path) -> dict[str, Any]:
    done = helpers.run_cli("report", str(_session(temp)), "--json", "-q")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _events(temp: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted((_session(temp) / "logs" / "raytrace_kit").glob("events-*.jsonl")):
        found.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return found


def _line_of(name: str, marker: str) -> int:
    text = (PROGRAMS / f"{name}.py").read_text().splitlines()
    return next(n for n, line in enumerate(text, 1) if marker in line)


class TestFidelity:
    """Every entry point that takes a UDF: the same output as plain Ray Data, and recorded."""

    def test_results_and_operator_names_are_plain_ray_datas(self, temp: Path) -> None:
        plain = _run(temp / "plain", "shapes", kit=False)
        assert plain.returncode == 0, plain.stderr
        kit = _run(temp / "kit", "shapes")
        assert kit.returncode == 0, kit.stderr
        assert kit.stdout == plain.stdout  # rows, formats, groups, the operators' names
        assert "MapBatches(double) <- ReadRange" in kit.stdout

        events = _events(temp / "kit")
        ends = [e for e in events if e["event"] == "call.end"]
        by_operator: dict[str, list[dict[str, Any]]] = {}
        for end in ends:
            by_operator.setdefault(end.get("operator") or "", []).append(end)
        # Each batch UDF's batches are calls, named after their operator, with their sizes.
        for operator in ("MapBatches(double)", "MapBatches(split)", "MapBatches(scale)",
                         "MapBatches(Clip)", "MapBatches(AddOffset)", "MapBatches(AsyncTag)",
                         "MapBatches(add_column)", "MapBatches(group_sum)"):  # fmt: skip
            assert by_operator.get(operator), (operator, sorted(by_operator))
        doubled = [e for e in by_operator["MapBatches(double)"] if e["kind"] == "task"]
        # Every row, once per execution (take_all, then groupby: the pipeline runs twice).
        assert sum(e["data"]["rows_in"] for e in doubled) == 2 * 200
        assert all(e["data"]["rows_in"] == e["data"]["rows_out"] for e in doubled)
        assert all(e["data"]["bytes_in"] > 0 for e in doubled)
        # split is a generator: one call per input batch, both outputs counted.
        split = by_operator["MapBatches(split)"]
        assert sum(e["data"]["rows_out"] for e in split) == sum(e["data"]["rows_in"] for e in split)
        # A callable class: __init__ once per actor (a pool of one per execution), then one
        # call per batch in those actors.
        inits = [e for e in by_operator["MapBatches(AddOffset)"] if e["kind"] == "actor_init"]
        assert [e["function"] for e in inits] == ["__main__.AddOffset.__init__"] * 2
        calls = [e for e in by_operator["MapBatches(AddOffset)"] if e["kind"] == "actor_method"]
        assert {e["actor_id"] for e in calls} == {e["actor_id"] for e in inits}
        assert {e["function"] for e in by_operator["MapBatches(AsyncTag)"]} >= {
            "__main__.AsyncTag.__call__"
        }
        # Per-row UDFs: counted rows, not a call each.
        rows = [e for e in events if e["event"] == "data.rows"]
        counted = {}
        for event in rows:
            counted[event["operator"]] = counted.get(event["operator"], 0) + event["rows"]
        assert counted["Filter(<lambda>)"] == 2 * 200  # each execution's rows, all written
        assert counted["Map(<lambda>)"] == 2 * 160  # those the filter kept
        # The plan, from the driver: each operator, its input, the line that built it.
        planned = {e["operator"]: e for e in events if e["event"] == "data.operator"}
        assert planned["MapBatches(split)"]["inputs"] == ["MapBatches(double)"]
        assert planned["MapBatches(AddOffset)"]["compute"] == "actors"
        assert planned["Filter(<lambda>)"]["per_row"] is True
        line = _line_of("shapes", ".map_batches(double)")
        assert planned["MapBatches(double)"]["site"].endswith(f"shapes.py:{line}")

        report = _report(temp / "kit")
        assert report["findings"] == []  # a clean pipeline: nothing to say
        shown = [row["operator"] for row in report["data_pipeline"]]
        assert shown[:3] == ["MapBatches(double)", "MapBatches(split)", "MapBatches(scale)"]


class TestFindings:
    """Each finding on a pipeline with the bug, and silent on the same pipeline fixed."""

    def test_the_bound_and_the_stages_it_holds_back(self, temp: Path) -> None:
        done = _run(temp, "bound")
        assert done.returncode == 0, done.stderr
        report = _report(temp)
        (found,) = [f for f in report["findings"] if f["kind"] == "data_bound"]
        assert found["subject"] == "__main__.score"
        assert found["title"].startswith("MapBatches(score) bounds the pipeline")
        assert f"bound.py:{_line_of('bound', 'map_batches(score)')}" in found["evidence"]
        # Both stages before it ran in operators of their own: held back.
        assert "MapBatches(clean) (" in found["evidence"]
        assert "MapBatches(Enrich) (" in found["evidence"]
        assert "backpressure" in found["evidence"]
        assert "concurrency=N" in found["fix"]
        rows = {row["operator"]: row for row in report["data_pipeline"]}
        assert rows["MapBatches(score)"]["batches"] == 16
        assert rows["MapBatches(score)"]["p50_s"] >= 0.2

    def test_a_stage_fused_into_the_bound_is_named_fused(self, temp: Path) -> None:
        done = _run(temp, "bound", "fused")
        assert done.returncode == 0, done.stderr
        (found,) = [f for f in _report(temp)["findings"] if f["kind"] == "data_bound"]
        assert found["subject"] == "__main__.Score"
        assert "fused with it (same tasks): MapBatches(clean)" in found["evidence"]
        assert "held back" not in found["evidence"]
        assert "ActorPoolStrategy" in found["fix"]

    def test_batches_that_grow_the_worker_are_named(self, temp: Path) -> None:
        done = _run(temp, "keeps")
        assert done.returncode == 0, done.stderr
        findings = _report(temp)["findings"]
        (found,) = [f for f in findings if f["kind"] == "data_memory"]
        assert found["title"].startswith("MapBatches(Embed)'s batches grow its worker's memory")
        per_batch = float(found["title"].rsplit("(", 1)[1].split(" MiB")[0])
        assert 140 <= per_batch <= 160  # 150 MB kept per batch
        assert not [f for f in findings if f["kind"] == "leak"]  # said once, by the data one

    def test_the_fixed_class_makes_no_memory_finding(self, temp: Path) -> None:
        done = _run(temp, "keeps", "fixed")
        assert done.returncode == 0, done.stderr
        assert _report(temp)["findings"] == []

    def test_failing_batches_and_a_skewed_batch(self, temp: Path) -> None:
        done = _run(temp, "uneven")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "170"  # two blocks of ten let through as errors, one x10
        report = _report(temp)
        findings = {f["kind"]: f for f in report["findings"]}
        failing = findings["data_failing"]
        assert failing["title"].startswith("MapBatches(Parse)'s UDF fails on some batches: 2 of")
        assert "ValueError x2" in failing["title"]
        skew = findings["data_skew"]
        assert skew["title"].startswith("A skewed batch in MapBatches(enrich): one took")
        assert skew["evidence"].endswith("its block held 10.0x the median batch's rows")
        assert "straggler" not in findings  # the same call, said once
        # One actor task ran every batch of Parse: those after a failed one are no retries.
        assert report["overview"]["retried"] == 0
        assert "flaky_retries" not in findings
        assert "serializing_actor" not in findings  # a pool of one, as asked


class TestReplay:
    """A callable class's failed batch, run again here: the same error from the same line."""

    def test_a_failed_batch_of_an_actor_pool_replays(self, temp: Path) -> None:
        done = _run(temp, "uneven", options=("--capture", "failures"))
        assert done.returncode == 0, done.stderr
        failed = [e for e in _events(temp) if e["event"] == "call.end" and e["status"] == "error"]
        assert len(failed) == 2
        assert all(e["function"] == "__main__.Parse.__call__" for e in failed)
        assert all(e.get("replay_state_missing") is None for e in failed), failed
        again = helpers.run_cli("replay", failed[0]["call_id"], str(_session(temp)), "-q")
        assert again.returncode == 1, again.stdout + again.stderr
        line = _line_of("uneven", "raise ValueError")
        assert f'uneven.py", line {line}, in __call__' in again.stderr
        assert again.stderr.rstrip().splitlines()[-1].startswith("ValueError: bad row ")


class TestBeforeTheRun:
    """A UDF Ray cannot send is rejected before any task starts, the variable named."""

    def test_a_warning_ray_data_gives_names_the_users_line(self, temp: Path) -> None:
        """Found by Ray Data's own tests: it named the kit's hook (docs/ray-data.md)."""
        line = f"warned at {PROGRAMS / 'warns.py'}:{_line_of('warns', 'WARNS HERE')}"
        for kit in (False, True):
            done = _run(temp, "warns", kit=kit)
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == [line], (kit, done.stdout)

    def test_a_udf_closing_over_a_lock_is_rejected_at_build_time(self, temp: Path) -> None:
        done = _run(temp, "unpicklable")
        assert done.returncode == 1
        last = done.stderr.strip().splitlines()
        said = "\n".join(last[-3:])
        assert "NotSerializableError: building the dataset (map_batches)" in said
        assert "__main__.tag.lock [global, _thread.lock]" in said
        assert not [e for e in _events(temp) if e["event"].startswith("call.")]  # none ran

    def test_explain_of_plain_ray_datas_failure_names_the_udf(self, temp: Path) -> None:
        done = _run(temp, "unpicklable", kit=False)
        assert done.returncode == 1
        assert "Could not serialize the put value" in done.stderr  # Ray's own words
        explained = helpers.run_cli("explain", "-q", stdin=done.stdout + done.stderr)
        assert explained.returncode == 0, explained.stderr
        first = explained.stdout.splitlines()[0]
        assert first.startswith("Serialization: a Ray Data UDF cannot be shipped")
        assert "tag (MapBatches(tag))" in first
        assert f"unpicklable.py:{_line_of('unpicklable', 'the building line')}" in first


class TestWhileItRuns:
    """A UDF blocked: ``stuck`` names it, its operator and its line; ``top`` its operator."""

    def test_stuck_and_top_see_the_blocked_batch(self, temp: Path) -> None:
        folder = temp / "checkpoint"
        folder.mkdir()
        with (temp / "output").open("wb") as output:
            program = subprocess.Popen(
                [sys.executable, "-m", "raytrace_kit", "run", str(PROGRAMS / "blocked.py")],
                cwd=PROGRAMS, env=_env(temp, DATA_CHECKPOINT=str(folder)), stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            try:
                helpers.wait_until(
                    lambda: (folder / "ready").exists() or program.poll() is not None,
                    "the UDF is running",
                    timeout=TIMEOUT_S,
                )
                assert program.poll() is None, (temp / "output").read_text()
                address = (folder / "address").read_text()
                stuck = json.loads(helpers.run_cli("stuck", "--address", address, "--json",
                                                   "-q").stdout)  # fmt: skip
                top = json.loads(helpers.run_cli("top", "--once", "--json", "--address",
                                                 address, "-q").stdout)  # fmt: skip
                (folder / "go").touch()
                assert program.wait(timeout=TIMEOUT_S) == 0, (temp / "output").read_text()
            finally:
                if program.poll() is None:
                    os.killpg(program.pid, signal.SIGKILL)
                    program.wait()
        waiting = [c for c in stuck["calls"] if c["function"] == "__main__.lookup"]
        assert waiting, stuck["calls"]
        call = waiting[0]
        assert call["operator"] == "MapBatches(lookup)"
        line = _line_of("blocked", "the waiting line")
        assert call["where"].endswith(f"blocked.py:{line}")
        assert call["why"] == f"blocked in acquire() at {call['where']}"
        operators = {row["operator"]: row for row in top["operators"]}
        assert operators["MapBatches(lookup)"]["in_flight"] >= 1
        assert operators["MapBatches(lookup)"]["functions"] == ["__main__.lookup"]
