"""Tests for log_dir() and file naming."""

from __future__ import annotations

import json
import os
import re
import shutil
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


# One process through three settings: Ray up, Ray shut down (local mode), a new session.
_ACROSS_SESSIONS = """
import json, sys
import ray
import raytrace_kit
from raytrace_kit import debuggable, local_mode

@debuggable
@ray.remote(num_cpus=0)
def first(x):
    return x

@debuggable
@ray.remote
def debugged(x):
    return x + 1

@debuggable
@ray.remote(num_cpus=0)
def second(x):
    return x

def where(function):
    # The directories holding a call.start of ``function``, of all the program wrote.
    import glob
    found = set()
    for path in glob.glob(sys.argv[1] + "/**/events-*.jsonl", recursive=True):
        for line in open(path):
            event = json.loads(line)
            if event["event"] == "call.start" and event["function"].endswith(function):
                found.add(str(__import__("pathlib").Path(path).resolve().parent))
    return sorted(found)

def read(function):
    events = raytrace_kit.read_events()
    ran = [e for e in events if e["event"] in ("call.start", "call.end")]
    return [e["event"] for e in ran if e["function"].endswith(function)]

said = {}
ray.init(num_cpus=1, include_dashboard=False, _temp_dir=sys.argv[1] + "/one")
ray.get(first.remote(1))
said["first"] = (str(raytrace_kit.log_dir()), where("first"), read("first"))
ray.shutdown()
with local_mode():
    ray.get(debugged.remote(1))
said["local"] = (str(raytrace_kit.log_dir()), where("debugged"), read("debugged"))
ray.init(num_cpus=1, include_dashboard=False, _temp_dir=sys.argv[1] + "/two")
ray.get(second.remote(1))
said["second"] = (str(raytrace_kit.log_dir()), where("second"), read("second"))
ray.shutdown()
print(json.dumps(said))
"""


def test_records_go_where_log_dir_says_across_sessions(tmp_path: Path) -> None:
    """Ray up, shut down for local mode, a new session: records land where readers look.

    Local-mode calls after ``ray.shutdown()`` were written into the old session's
    directory while ``log_dir()`` and ``read_events()`` named a new one.
    """
    program = tmp_path / "across.py"
    program.write_text(_ACROSS_SESSIONS)
    # Short: Ray's socket paths under a temp dir must fit in 107 bytes.
    short = Path(tempfile.mkdtemp(prefix="rtk-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "RAYTRACE_"))}
    env["TMPDIR"] = str(short / "tmp")  # local mode's own directory: this test's
    Path(env["TMPDIR"]).mkdir()
    try:
        done = subprocess.run(
            [sys.executable, str(program), str(short)],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    for name, (directory, written_in, read) in said.items():
        assert written_in == [str(Path(directory).resolve())], (name, said)  # as log_dir() says
        assert read == ["call.start", "call.end"], (name, said)  # and read from there
    assert said["first"][0].startswith(str(short / "one"))
    assert said["local"][0].startswith(str(short / "tmp"))
    assert said["second"][0].startswith(str(short / "two"))
