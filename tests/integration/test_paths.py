"""Tests for log_dir() and file naming."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import ray
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit import log_dir
from raytrace_kit._output.paths import event_file_name
from tests.helpers import ray_session_dir


@pytest.mark.usefixtures("ray_session")
def test_log_dir_is_in_the_session_logs_of_this_node() -> None:
    """log_dir() is <temp dir>/<session>/logs/raytrace_kit, found through the context."""
    expected = Path(ray_session_dir(), "logs", "raytrace_kit")
    assert log_dir() == expected
    assert expected.is_dir()


@pytest.mark.usefixtures("ray_session")
def test_workers_agree_with_the_driver() -> None:
    """A worker on the same node reports the same directory."""

    @ray.remote
    def where() -> Path:
        return log_dir()

    assert ray.get(where.remote()) == log_dir()


def test_environment_variable_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RAYTRACE_LOG_DIR wins, and is created."""
    monkeypatch.setenv("RAYTRACE_LOG_DIR", str(tmp_path / "custom"))
    assert log_dir() == tmp_path / "custom"
    assert (tmp_path / "custom").is_dir()


def test_without_ray_a_stable_temp_directory() -> None:
    """With Ray not initialized: one fresh directory under the temp dir, no cluster."""
    script = (
        "import ray, raytrace_kit as rk\n"
        "a = rk.log_dir(); rk.get_logger().info('offline'); b = rk.log_dir()\n"
        "assert a == b, (a, b)\n"
        "assert not ray.is_initialized()\n"
        "assert [e['event'] for e in rk.read_events()] == ['offline']\n"
        "print(a)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "RAYTRACE_LOG_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    path = Path(out)
    # One directory per user in the temp dir, a run's own inside: start time, then pid.
    assert path.parent == Path(tempfile.gettempdir(), f"raytrace_kit-{os.getuid()}")
    assert re.match(r"\d{8}-\d{6}-\d+-", path.name), path.name


@given(
    st.one_of(st.none(), st.text(alphabet="0123456789abcdef", min_size=1)),
    st.integers(1, 2**22),
)
def test_event_file_names(node_id: str | None, pid: int) -> None:
    """Names are events-<node prefix>-<pid>.jsonl, never worker*, at most 12 id chars."""
    name = event_file_name(node_id, pid)
    assert not name.startswith("worker")
    assert name.startswith("events-")
    assert name.endswith(f"-{pid}.jsonl")
    prefix = name[len("events-") : -len(f"-{pid}.jsonl")]
    assert prefix == (node_id[:12] if node_id else "nonode")
