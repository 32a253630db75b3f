"""Object refs that hold the store: `raytrace-kit memory` live, and the report's finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parents[1] / "programs" / "store_refs.py"
HOLD_LINE = next(
    n for n, text in enumerate(PROGRAM.read_text().splitlines(), 1) if "HOLDS THE STORE" in text
)
CALLS, SIZE = 16, 10 * 2**20
DEADLINE_S = 240.0  # a failure's bound, never a synchronization


def _kit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raytrace_kit", *args],
        cwd=cwd, capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip


def _until(found: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    """Wait for ``found()`` (a file written by the program or the kit), or fail."""
    deadline = time.monotonic() + DEADLINE_S
    while not found():
        if process.poll() is not None:
            pytest.fail(
                f"the program ended first: {process.stdout.read() if process.stdout else ''}"
            )
        if time.monotonic() > deadline:
            pytest.fail("not written in time")
        time.sleep(0.05)


def _held_recorded(logs: Path) -> bool:
    return any(b'"store.held"' in f.read_bytes() for f in (logs / "raytrace_kit").glob("driver-*"))


class TestBuggy:
    """The refs kept in a list: the live view and the report name their line."""

    def test_memory_and_report_name_the_line(self, tmp_path: Path) -> None:
        """`memory` names the line with its bytes; the report's finding names it too."""
        ready, gate = tmp_path / "ready", tmp_path / "gate"
        command = [sys.executable, "-m", "raytrace_kit", "run", str(PROGRAM), "buggy"]
        process = subprocess.Popen(
            [*command, str(ready), str(gate)],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "RAY_ENABLE_AUTO_CONNECT": "0"},
        )  # fmt: skip
        try:
            _until(ready.exists, process)
            started = json.loads(ready.read_text())
            shown = _kit("memory", "--address", started["address"], "--json", cwd=tmp_path)
            assert shown.returncode == 0, shown.stderr
            view = json.loads(shown.stdout)
            first = view["groups"][0]
            assert first["site"].endswith(f"store_refs.py:{HOLD_LINE}")
            assert first["function"].endswith("produce")
            assert first["count"] == CALLS
            assert CALLS * SIZE <= first["bytes"] <= CALLS * SIZE * 1.01
            assert first["type"] == "local ref"
            logs = Path(started["logs"])
            _until(lambda: _held_recorded(logs), process)  # the driver's record of it
        finally:
            gate.write_text("go")
            out, _ = process.communicate(timeout=DEADLINE_S)
        assert process.returncode == 0, out
        report = _kit("report", "-q", "--json", str(logs.parent), cwd=tmp_path)
        found = [f for f in json.loads(report.stdout)["findings"] if f["kind"] == "refs_hold_store"]
        assert len(found) == 1, report.stdout[-2000:]
        assert f"store_refs.py:{HOLD_LINE}" in found[0]["title"]
        assert f"{CALLS} objects" in found[0]["title"]
        assert "ray.wait" in found[0]["fix"]


class TestFixed:
    """The same program, taking each result as it ends, draws no finding."""

    def test_no_finding(self, tmp_path: Path) -> None:
        """Its report makes no finding at all, and the driver wrote no store.held."""
        told = tmp_path / "told"
        out = _kit("run", str(PROGRAM), "fixed", str(told), cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        logs = Path(json.loads(told.read_text())["logs"])
        assert not _held_recorded(logs)
        report = _kit("report", "-q", "--json", str(logs.parent), cwd=tmp_path)
        data = json.loads(report.stdout)
        assert data["findings"] == [], data["findings"]
