"""Clean programs make clean reports: no finding, and nothing stuck while they run.

Each program in ``tests/programs/clean`` is small, well written and of its own shape
(fan-out with ``ray.wait``, an ``ActorPool``, an async actor awaiting properly, a pipeline
passing refs, a stateful actor with a bounded cache, a Ray Data pipeline, workers fed
through a queue). Each runs as a user runs it: ``raytrace-kit run``, a real subprocess,
on a Ray of its own (``ray.init(num_cpus=2)`` in the program, under a temp dir of its own,
so no other run's records mix in); then ``raytrace-kit report --json`` of that session
must make no finding. The programs that call ``_checkpoint.checkpoint()`` stop there while
calls are in flight, and ``raytrace-kit stuck`` must find no deadlock, nothing infeasible
and no stuck call. None of this depends on timing: a finding here is a rule firing
without its evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import helpers

CLEAN = Path(__file__).parent.parent / "programs" / "clean"
PROGRAMS = sorted(path.stem for path in CLEAN.glob("*.py") if not path.stem.startswith("_"))
# The programs that stop midway, and the calls then running (their subscribers, workers).
LOOKED_AT = {"async_actor": 3, "queue_workers": 2}
RUN_TIMEOUT_S = 240.0


@dataclass
class Run:
    """One program's run: its exit, its output, its report, and stuck's look midway."""

    returncode: int
    output: str
    report: dict[str, Any]
    stuck: dict[str, Any] | None


def _kit(*arguments: str) -> subprocess.CompletedProcess[str]:
    done = helpers.run_cli(*arguments)
    assert done.returncode == 0, f"raytrace-kit {' '.join(arguments)}: {done.stderr}"
    return done


def _look_midway(folder: Path, program: subprocess.Popen[bytes], running: int) -> dict[str, Any]:
    """``raytrace-kit stuck --json`` once the program stopped at its checkpoint.

    Asked again (for a minute at most) until the calls the program leaves running have
    started: its workers may still be starting when it gets there.
    """
    ready = helpers.wait_until(
        lambda: (folder / "ready").exists() or program.poll() is not None,
        "the program reached its checkpoint",
        timeout=RUN_TIMEOUT_S,
    )
    assert ready
    assert program.poll() is None, "the program ended before its checkpoint"
    address = (folder / "ready").read_text()
    deadline = time.monotonic() + 60
    while True:
        looked = json.loads(_kit("stuck", "--address", address, "--json", "-q").stdout)
        if looked["running"] >= running or time.monotonic() > deadline:
            return looked  # type: ignore[no-any-return]
        time.sleep(0.5)


def _run(name: str, temp: Path) -> Run:
    """Run one program under ``raytrace-kit run`` on its own Ray, then report its session."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_ADDRESS")}
    env["RAY_TMPDIR"] = str(temp)  # its own session directory: only its records there
    folder = temp / "checkpoint"
    if name in LOOKED_AT:
        folder.mkdir()
        env["CLEAN_CHECKPOINT"] = str(folder)
    with (temp / "output").open("wb") as output:
        program = subprocess.Popen(
            [sys.executable, "-m", "raytrace_kit", "run", f"{name}.py"],
            cwd=CLEAN,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its group, ours to end if it hangs
        )
        try:
            stuck = None
            if name in LOOKED_AT:
                stuck = _look_midway(folder, program, LOOKED_AT[name])
                (folder / "go").touch()
            returncode = program.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if program.poll() is None:
                os.killpg(program.pid, signal.SIGKILL)
                program.wait()
    said = (temp / "output").read_text(errors="replace")
    session = (temp / "ray" / "session_latest").resolve()
    report = json.loads(_kit("report", str(session), "--json", "-q").stdout)
    return Run(returncode, said, report, stuck)


@pytest.fixture(scope="module")
def runs() -> Iterator[Callable[[str], Run]]:
    """Each program's run, made once for the tests that ask (the report's, stuck's)."""
    made: dict[str, Run] = {}
    temps: list[Path] = []

    def run(name: str) -> Run:
        if name not in made:
            # Short, under /tmp: Ray's socket paths in it must stay under 108 bytes.
            temps.append(Path(tempfile.mkdtemp(prefix="rtk-clean-", dir="/tmp")))
            made[name] = _run(name, temps[-1])
        return made[name]

    yield run
    for temp in temps:
        shutil.rmtree(temp, ignore_errors=True)


def test_the_corpus_has_the_shapes_it_promises() -> None:
    assert set(PROGRAMS) >= {
        "fan_out", "actor_pool", "async_actor", "pipeline_refs", "bounded_cache",
        "data_pipeline",
    }  # fmt: skip
    assert set(LOOKED_AT) <= set(PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_clean_program_makes_no_finding(runs: Callable[[str], Run], name: str) -> None:
    """The report of the whole run: its calls all recorded, and not one finding."""
    run = runs(name)
    assert run.returncode == 0, run.output
    overview = run.report["overview"]
    assert overview["calls"] > 0, overview
    assert (overview["failed"], overview["interrupted"]) == (0, 0), overview
    findings = run.report["findings"]
    said = "\n".join(f"- {f['title']}\n  {f['evidence']}" for f in findings)
    assert not findings, f"{name}: {len(findings)} finding(s) on a clean program:\n{said}"


@pytest.mark.parametrize("name", sorted(LOOKED_AT))
def test_stuck_midway_finds_nothing_stuck(runs: Callable[[str], Run], name: str) -> None:
    """Calls in flight, waiting as they should: no deadlock, nothing infeasible, none stuck."""
    looked = runs(name).stuck
    assert looked is not None
    assert looked["running"] >= LOOKED_AT[name], looked["calls"]
    assert looked["deadlocks"] == [], looked["deadlocks"]
    assert looked["infeasible"] == [], looked["infeasible"]
    assert looked["stuck"] == [], looked["stuck"]
    assert looked["stragglers"] == [], looked["stragglers"]
    assert looked["problems"] == [], looked["problems"]
