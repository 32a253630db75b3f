"""The command's event lines and files, as a user pipes and reads them (real subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

from tests import helpers

TASK = "8da829ddee095f21ffffffffffffffffffffffff01000000"


def _session(tmp_path: Path) -> Path:
    """One failed call (its second attempt), one call cut off: no end."""
    ids = {"node_id": "ab" * 28, "pid": 7, "worker_id": "cd" * 28, "job_id": "01000000"}
    lines = [
        {"timestamp": "2026-01-01T00:00:00.000000+00:00", "level": "info", "event": "call.start",
         "call_id": "c1", "function": "jobs.parse", "task_id": TASK, "attempt": 1, **ids},
        {"timestamp": "2026-01-01T00:00:01.500000+00:00", "level": "error", "event": "call.end",
         "call_id": "c1", "function": "jobs.parse", "task_id": TASK, "attempt": 1, **ids,
         "status": "error", "duration_s": 1.5, "error_type": "ValueError", "error": "bad row 7"},
        {"timestamp": "2026-01-01T00:00:02.000000+00:00", "level": "info", "event": "call.start",
         "call_id": "c2", "function": "jobs.load", "task_id": "ee" * 24, "attempt": 0, **ids},
    ]  # fmt: skip
    (tmp_path / "events-abababababab-7.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    return tmp_path


def test_interrupted_calls_are_listed_by_their_start(tmp_path: Path) -> None:
    """--status interrupted: the call.start of each call that has no end, and only those."""
    shown = helpers.run_cli("events", str(_session(tmp_path)), "--status", "interrupted", "--json")
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(x)["call_id"] for x in shown.stdout.splitlines()] == ["c2"]


def test_a_line_names_the_task_that_explain_takes(tmp_path: Path) -> None:
    """Each call line shows its task id and attempt; explain --task takes that id."""
    source = _session(tmp_path)
    shown = helpers.run_cli("events", str(source), "--status", "error")
    assert shown.returncode == 0, shown.stderr
    (line,) = shown.stdout.splitlines()
    assert f"task={TASK[:16]} attempt=1" in line
    explained = helpers.run_cli("explain", str(source), "--task", TASK[:16])
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith("ValueError in a task: Your code raised ValueError in ")
    assert "jobs.parse" in explained.stdout


def test_report_html_prints_the_files_path_not_the_text(tmp_path: Path) -> None:
    """--html writes the page and prints where; the text report stays out of the way."""
    out = tmp_path / "run.html"
    shown = helpers.run_cli("report", str(_session(tmp_path)), "--html", str(out))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == str(out)
    page = out.read_text()
    assert "jobs.parse" in page
    assert "ValueError" in page
