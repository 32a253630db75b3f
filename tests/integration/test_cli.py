"""The raytrace-kit command, run as users run it: a real subprocess, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import ray

from raytrace_kit import debuggable
from tests import helpers


def _session(tmp_path: Path) -> Path:
    lines = [
        {"timestamp": "2026-01-01T00:00:00.000000+00:00", "level": "info", "event": "call.start",
         "call_id": "c1", "function": "jobs.parse", "node_id": "ab" * 28, "pid": 7},
        {"timestamp": "2026-01-01T00:00:01.500000+00:00", "level": "error", "event": "call.end",
         "call_id": "c1", "function": "jobs.parse", "node_id": "ab" * 28, "pid": 7,
         "status": "error", "duration_s": 1.5, "error_type": "ValueError", "error": "bad row 7"},
        {"timestamp": "2026-01-01T00:00:02.000000+00:00", "level": "info", "event": "call.start",
         "call_id": "c2", "function": "jobs.load", "node_id": "ab" * 28, "pid": 7},
    ]  # fmt: skip
    (tmp_path / "events-abababababab-7.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    return tmp_path


@pytest.mark.compat
def test_events_readable_and_json(tmp_path: Path) -> None:
    """One readable line per event; --status filters; --json gives lines jq can read."""
    source = _session(tmp_path)
    shown = helpers.run_cli("events", str(source), "--status", "error")
    assert shown.returncode == 0, shown.stderr
    (line,) = shown.stdout.splitlines()
    assert "call.end" in line
    assert "jobs.parse" in line
    assert "1.500s" in line
    assert "ValueError: bad row 7" in line
    as_json = helpers.run_cli("events", str(source), "--json", "--function", "load")
    assert [json.loads(x)["call_id"] for x in as_json.stdout.splitlines()] == ["c2"]


def test_timeline_writes_the_file(tmp_path: Path) -> None:
    source = _session(tmp_path)
    out = tmp_path / "trace.json"
    done = helpers.run_cli("timeline", str(source), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    slices = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    assert {s["args"]["status"] for s in slices} == {"error", "interrupted"}


@pytest.mark.compat
def test_exit_codes_and_messages(tmp_path: Path) -> None:
    """Missing or empty source: 3, saying which; bad usage: 2; --help: 0."""
    missing = helpers.run_cli("events", str(tmp_path / "nowhere"))
    assert missing.returncode == 3
    assert "nowhere" in missing.stderr
    empty = helpers.run_cli("events", str(tmp_path))
    assert empty.returncode == 3
    assert "no event files" in empty.stderr
    assert helpers.run_cli().returncode == 2
    helped = helpers.run_cli("events", "--help")
    assert helped.returncode == 0
    assert "--status" in helped.stdout


def test_console_script_is_installed() -> None:
    """`raytrace-kit` is on the path of the environment the package is installed in."""
    script = Path(sys.executable).parent / "raytrace-kit"
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0
    assert "events" in done.stdout


@debuggable
@ray.remote
def traced(x: int) -> int:
    return x


@pytest.mark.usefixtures("ray_session")
def test_collect_from_the_running_cluster(tmp_path: Path) -> None:
    """`raytrace-kit collect` connects to the running cluster and copies its files."""
    ray.get(traced.remote(1))
    address = ray.get_runtime_context().gcs_address  # other clusters may run on this machine
    done = helpers.run_cli("collect", "--address", address, "-o", str(tmp_path / "dest"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == str(tmp_path / "dest")
    assert "collected" in done.stdout
    shown = helpers.run_cli("events", str(tmp_path / "dest"), "--function", "traced", "--json")
    mine = [
        json.loads(x)
        for x in shown.stdout.splitlines()
        if json.loads(x)["timestamp"] >= helpers.window_start()
    ]
    # The call's own events, each once (the driver's call.submit record of it is written
    # on the kit's thread's schedule, and its copy is not what this test is about).
    assert [e["event"] for e in mine if e["event"] != "call.submit"] == ["call.start", "call.end"]


def test_usage_errors_and_a_closed_pipe(tmp_path: Path) -> None:
    """A bad time or an ambiguous task id is bad usage (2); `| head` ends quietly (0)."""
    source = _session(tmp_path)
    bad = helpers.run_cli("report", str(source), "--since", "19:28")
    assert bad.returncode == 2
    assert "'19:28' is not an ISO 8601 time" in bad.stderr
    lines = [
        {"timestamp": f"2026-01-01T00:00:0{i}.000000+00:00", "level": "info", "event": "call.end",
         "call_id": f"d{i}", "function": "jobs.step", "status": "ok", "duration_s": 0.1,
         "task_id": f"abcd{i}" + "0" * 44, "pid": 8}
        for i in range(3)
    ]  # fmt: skip
    (tmp_path / "events-abababababab-8.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines * 3000)
    )
    ambiguous = helpers.run_cli("explain", str(source), "--task", "abcd")
    assert ambiguous.returncode == 2
    assert "matches 3 tasks" in ambiguous.stderr
    with subprocess.Popen(
        [sys.executable, "-m", "raytrace_kit", "events", str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as piped:
        assert piped.stdout is not None
        piped.stdout.readline()
        piped.stdout.close()  # as `head -1` does
        assert piped.wait(timeout=60) == 0
        assert piped.stderr is not None
        (said,) = piped.stderr.read().decode().splitlines()  # which run it read, and no more
        first = datetime(2026, 1, 1, tzinfo=timezone.utc).astimezone()  # shown in local time
        assert said.startswith(
            f"raytrace-kit: {source} (event files, first event {first:%Y-%m-%d %H:%M:%S}, 1 node, "
        )


def test_stuck_attaches_to_a_cluster_without_token_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster here that takes no token is attached without one, from a plain shell.

    With one, Ray would drop the actors the command makes.
    """
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
        done = subprocess.run(
            [sys.executable, "-m", "raytrace_kit", "stuck", "--address", cluster.address],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith(f"raytrace-kit: cluster {cluster.address}")
        assert done.stdout.startswith("Stuck? 0 call(s) in flight")
    finally:
        cluster.shutdown()
