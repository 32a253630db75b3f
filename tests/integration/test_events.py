"""Tests for the event pipeline: schema, files, get_logger(), read_events(), failures."""

from __future__ import annotations

import inspect
import json
import logging
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import ray
import structlog
from hypothesis import given
from hypothesis import strategies as st

try:  # where Ray 2.60 keeps the names of its log fields; 2.40-2.53 under ray._private
    from ray._common.logging_constants import LogKey
except ImportError:
    from ray._private.ray_logging.constants import LogKey  # type: ignore[no-redef]

import raytrace_kit
from raytrace_kit import RaytraceKitWarning, debuggable, get_logger, read_events
from raytrace_kit._output.logger import _to_json_line
from tests import helpers
from tests.helpers import TASK_NAMES, events_of

REQUIRED = {
    "timestamp": str,
    "level": str,
    "event": str,
    "schema": int,
    "call_id": str,
    "function": str,
    "kind": str,
    "mode": str,
    "task_id": str,
    "job_id": str,
    "node_id": str,
    "worker_id": str,
    "pid": int,
    "attempt": int,
    "task_name": str if TASK_NAMES else type(None),
    "rss_bytes": int,  # call.start has them too: a call's own growth is end - start
    "rss_minus_shr_bytes": int,
    "max_rss_bytes": int,
}
END_EXTRA = {
    "duration_s": float,
    # Null after a call of the same function under 1 ms in the same worker (an earlier
    # test's): test_report.py's test_clocks_are_read_unless_the_last_call_was_short.
    "cpu_s": (float, type(None)),
    "status": str,
}


@debuggable
@ray.remote
def handle(record: dict[str, str]) -> int:
    return len(record)


@debuggable
@ray.remote
def burn_and_fail(seconds: float) -> None:
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        pass
    parse_record("not a number")


def parse_record(text: str) -> int:
    return int(text)


@debuggable
@ray.remote
def child(x: int) -> int:
    return x


@debuggable
@ray.remote
class Keeper:
    def keep(self, x: int) -> int:
        return x


@debuggable
@ray.remote
def fan_out(keeper: object) -> list[int]:
    return ray.get([child.remote(1), keeper.keep.remote(2)])  # type: ignore[attr-defined]


@debuggable(log_args=True)
@ray.remote
def login(user: str, *, password: str, retries: int = 1) -> str:
    return user


@debuggable(log_args=True)
@ray.remote
class Vault:
    def put(self, record: dict[str, str]) -> int:
        return len(record)


@pytest.mark.compat
@pytest.mark.usefixtures("ray_session")
class TestSchema:
    """call.start and call.end carry the documented fields, with the right types."""

    def test_fields_and_types(self) -> None:
        """Every documented field is present, typed, and consistent across the pair."""
        assert ray.get(handle.remote({"a": "b"})) == 1
        start, end = events_of(handle)
        for event, fields in ((start, REQUIRED), (end, REQUIRED | END_EXTRA)):
            for name, kind in fields.items():
                assert isinstance(event[name], kind), (name, event[name])
        assert (start["event"], end["event"]) == ("call.start", "call.end")
        assert start["call_id"] == end["call_id"]
        assert end["function"] == f"{__name__}.handle"
        assert (end["kind"], end["mode"], end["status"]) == ("task", "ray", "ok")
        assert end["actor_id"] is None
        assert end["job_id"] == ray.get_runtime_context().get_job_id()
        assert end["node_id"] == ray.get_runtime_context().get_node_id()
        assert end["pid"] != os.getpid()
        stamp = datetime.fromisoformat(end["timestamp"])
        assert stamp.utcoffset() == timedelta(0)
        assert 0 <= end["duration_s"] < 5
        assert 0 < end["rss_minus_shr_bytes"] <= end["rss_bytes"] <= end["max_rss_bytes"]

    def test_failed_call_has_its_traceback_cpu_and_task_name(self) -> None:
        """Schema 2: the failing frame in the traceback, CPU time, Ray's task name (2.41+)."""
        with pytest.raises(ValueError, match="not a number"):
            ray.get(burn_and_fail.options(name="custom-name").remote(0.2))
        start, end = events_of(burn_and_fail)
        assert start["schema"] == end["schema"] == 2
        assert end["task_name"] == ("custom-name" if TASK_NAMES else None)
        assert 0.15 <= end["cpu_s"] <= end["duration_s"] + 0.05
        lines = end["traceback"].splitlines()
        assert lines[0] == "Traceback (most recent call last):"
        assert "    return int(text)" in lines  # the failing line, as Python prints it
        assert lines[-1] == "ValueError: invalid literal for int() with base 10: 'not a number'"
        assert "raytrace_kit" not in end["traceback"]  # the kit's own frames are left out
        assert start["rss_bytes"] > 0

    def test_calls_name_the_call_that_submitted_them(self) -> None:
        """parent_call_id/parent_task_id link a task's and a method's calls to their caller."""
        keeper = Keeper.remote()
        assert ray.get(fan_out.remote(keeper)) == [1, 2]
        (parent,) = events_of(fan_out, "call.start")
        assert parent["parent_call_id"] is None  # submitted by the driver, outside calls
        (task,) = events_of(child, "call.start")
        method = next(e for e in events_of(Keeper, "call.start") if e["function"].endswith("keep"))
        for start in (task, method):
            assert start["parent_call_id"] == parent["call_id"]
            assert start["parent_task_id"] == parent["task_id"]
        session = raytrace_kit.open_session()
        children = session.children(parent["call_id"])
        assert sorted(c.function.rsplit(".", 1)[-1] for c in children) == ["child", "keep"]

    def test_log_args_shows_arguments_with_secrets_redacted(self) -> None:
        """Opt-in argument capture: short reprs, secret-looking keys redacted, no self."""
        secret = "hunter2-secret"  # a test value, not a credential
        assert ray.get(login.remote("ann", password=secret, retries=3)) == "ann"
        vault = Vault.remote()
        assert ray.get(vault.put.remote({"name": "db", "token": "tok-123456"})) == 2
        (start,) = events_of(login, "call.start")
        assert start["args"] == ["'ann'"]
        assert start["kwargs"] == {"password": "<redacted>", "retries": "3"}
        put = next(e for e in events_of(Vault, "call.start") if e["function"].endswith("put"))
        assert put["args"] == ["{'name': 'db', 'token': <redacted>}"]
        text = b"".join(p.read_bytes() for p in raytrace_kit.log_dir().glob("events-*"))
        assert b"hunter2-secret" not in text
        assert b"tok-123456" not in text

    def test_ray_id_fields_use_ray_logging_names(self) -> None:
        """The Ray id fields are named as ray.LoggingConfig(encoding="JSON") names them."""
        ray.get(handle.remote({}))
        (end,) = events_of(handle, "call.end")
        for key in (LogKey.JOB_ID, LogKey.NODE_ID, LogKey.WORKER_ID, LogKey.TASK_ID):
            assert key.value in end
        assert LogKey.ACTOR_ID.value in end

    def test_argument_values_are_not_logged(self) -> None:
        """Nothing of the arguments reaches the event file."""
        secret = "sk-live-0123456789abcdef"
        ray.get(handle.remote({"api_key": secret}))
        assert len(events_of(handle, "call.end")) == 1
        text = b"".join(p.read_bytes() for p in raytrace_kit.log_dir().glob("events-*"))
        assert secret.encode() not in text
        assert b"api_key" not in text

    def test_file_per_process_named_by_node_and_pid(self) -> None:
        """Events go to events-<node prefix>-<pid>.jsonl, never a worker* file."""
        ray.get(handle.remote({}))
        (end,) = events_of(handle, "call.end")
        path = raytrace_kit.log_dir() / f"events-{end['node_id'][:12]}-{end['pid']}.jsonl"
        assert end["call_id"] in path.read_text()
        assert not any(p.name.startswith("worker") for p in raytrace_kit.log_dir().iterdir())


@pytest.mark.usefixtures("ray_session")
class TestGetLogger:
    """get_logger() writes user events with context, without touching global config."""

    @pytest.mark.compat
    def test_inside_a_call_events_carry_the_call(self) -> None:
        """A user event inside a task carries that call's id and lands beside it."""

        @debuggable
        @ray.remote
        def step(rows: int) -> None:
            raytrace_kit.get_logger(stage="load").info("batch.loaded", rows=rows)

        ray.get(step.remote(128))
        start, user, end = events_of(step)
        assert user["event"] == "batch.loaded"
        assert (user["stage"], user["rows"], user["level"]) == ("load", 128, "info")
        assert user["call_id"] == start["call_id"] == end["call_id"]
        assert user["task_id"] == start["task_id"]

    def test_on_the_driver_events_go_to_the_driver_file(self) -> None:
        """On the driver, events carry the driver's ids and go to the driver's file."""
        log = get_logger(run="nightly")
        try:
            raise ZeroDivisionError("division by zero")  # noqa: TRY301
        except ZeroDivisionError:
            log.exception("driver.failed", attempt=2)
        ctx = ray.get_runtime_context()
        name = f"events-{ctx.get_node_id()[:12]}-{os.getpid()}.jsonl"
        # The driver's file holds earlier tests' driver events too (one pytest process).
        (event,) = [
            e
            for e in read_events(raytrace_kit.log_dir() / name)
            if e["timestamp"] >= helpers.window_start()
        ]
        assert event["event"] == "driver.failed"
        assert (event["run"], event["attempt"], event["level"]) == (
            "nightly",
            2,
            "error",
        )
        assert event["worker_id"] == ctx.get_worker_id()
        assert event["pid"] == os.getpid()
        assert "ZeroDivisionError" in event["exception"]

    def test_leaves_structlog_and_logging_configuration_alone(self) -> None:
        """No structlog.configure(), no root logging change, no printing."""
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        was_configured = structlog.is_configured()
        get_logger().info("hello")
        ray.get(handle.remote({}))
        assert structlog.is_configured() == was_configured
        assert (root.handlers, root.level) == (handlers, level)


class TestFailures:
    """An unwritable log directory never breaks the user's program."""

    def test_driver_unwritable_directory_warns_once(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Logging into a path that cannot be a directory warns once and goes on."""
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        monkeypatch.setenv("RAYTRACE_LOG_DIR", str(blocker / "sub"))
        log = get_logger()
        with pytest.warns(RaytraceKitWarning, match="cannot write in its log directory .*sub"):
            log.info("first")
        log.info("second")  # no second warning: pytest's filter turns one into an error

    @pytest.mark.usefixtures("ray_session")
    def test_worker_unwritable_directory_call_still_runs(self, tmp_path: Path) -> None:
        """In a worker that cannot write events, results and errors are plain Ray's."""
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        env = {"env_vars": {"RAYTRACE_LOG_DIR": str(blocker / "sub")}}

        @debuggable
        @ray.remote(max_retries=0)
        def divide(a: int, b: int) -> float:
            return a / b

        broken = divide.options(runtime_env=env)
        assert ray.get(broken.remote(6, 3)) == 2
        with pytest.raises(ZeroDivisionError):
            ray.get(broken.remote(1, 0))
        assert not (blocker.parent / "sub").exists()

    def test_a_log_directory_that_is_a_file_is_one_warning_per_process(
        self, tmp_path: Path
    ) -> None:
        """One warning in the driver and one per worker, naming the path and all it stops.

        Before, each part that writes there (the event file, the live stacks) warned of
        the same cause under its own name: two in the driver, two per worker.
        """
        blocker = tmp_path / "logs"
        blocker.write_text("")
        program = tmp_path / "job.py"
        program.write_text(
            "import ray\n"
            "from raytrace_kit import debuggable\n"
            "@debuggable\n"
            "@ray.remote(num_cpus=0)\n"
            "def f(x):\n"
            "    return x\n"
            "ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)\n"
            "print('result', ray.get([f.remote(i) for i in range(3)]))\n"
            f"{inspect.getsource(helpers.ray_session_dir)}\n"
            "print('session', ray_session_dir())\n"
            "ray.shutdown()\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "RAYTRACE_"))}
        env["RAYTRACE_LOG_DIR"] = str(blocker)
        done = subprocess.run(
            [sys.executable, str(program)], env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "result [0, 1, 2]" in done.stdout
        said = [line for line in done.stderr.splitlines() if "RaytraceKitWarning:" in line]
        assert len(said) == 1, said  # the driver's one
        session = Path(done.stdout.split("session ")[1].split()[0])
        workers = [  # where a worker's warnings go: its log in the session directory
            [line for line in path.read_text().splitlines() if "RaytraceKitWarning:" in line]
            for path in (session / "logs").glob("worker-*.err")
        ]
        workers = [lines for lines in workers if lines]
        assert workers, "no worker warned"
        assert all(len(lines) == 1 for lines in workers), workers  # one per worker
        for line in said + [lines[0] for lines in workers]:
            assert f"cannot write in its log directory {blocker} (it is a file, not a " in line
            assert "no event file, no live stacks and no profiles" in line
            assert "set RAYTRACE_LOG_DIR to a directory this user can write" in line


class TestReadEvents:
    """read_events() parses what processes wrote, even when one died mid-line."""

    def test_truncated_last_line_is_skipped(self, tmp_path: Path) -> None:
        """A partial last line (a process killed while writing) is ignored."""
        good = {"timestamp": "2026-01-01T00:00:00.000001+00:00", "event": "a"}
        path = tmp_path / "events-x-1.jsonl"
        path.write_text(json.dumps(good) + "\n" + '{"timestamp": "2026-01-01T00:0')
        assert read_events(path) == [good]

    def test_merges_files_recursively_sorted_by_time(self, tmp_path: Path) -> None:
        """Events from several files and subdirectories come back oldest first."""
        stamps = [f"2026-01-01T00:00:0{i}.000000+00:00" for i in range(4)]
        (tmp_path / "node2").mkdir()
        (tmp_path / "events-a-1.jsonl").write_text(
            "".join(json.dumps({"timestamp": stamps[i], "n": i}) + "\n" for i in (0, 3))
        )
        (tmp_path / "node2" / "events-b-2.jsonl").write_text(
            "".join(json.dumps({"timestamp": stamps[i], "n": i}) + "\n" for i in (1, 2))
        )
        (tmp_path / "unrelated.jsonl").write_text('{"n": 99}\n')
        assert [e["n"] for e in read_events(tmp_path)] == [0, 1, 2, 3]

    def test_missing_directory_is_a_clear_error(self, tmp_path: Path) -> None:
        """A path that does not exist (a typo, another node's dir) is an error naming it.

        An empty list would read as "nothing failed"; an existing directory with no
        events still reads as empty.
        """
        with pytest.raises(raytrace_kit.EventsNotFoundError, match="nothing-here"):
            read_events(tmp_path / "nothing-here")
        assert read_events(tmp_path) == []

    @given(
        st.dictionaries(
            st.text(min_size=1).filter(
                lambda k: k not in {"timestamp", "level", "event", "schema"}
            ),
            st.one_of(st.none(), st.booleans(), st.integers(), st.text()),
            max_size=8,
        ),
        st.text(),
    )
    def test_rendered_lines_parse_back(self, fields: dict[str, object], name: str) -> None:
        """Any fields render to one line that parses back to the same values."""
        line = _to_json_line(None, "info", {"event": name, "level": "info", **fields})
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        parsed = json.loads(line)
        assert parsed == {
            "timestamp": None,
            "level": "info",
            "event": name,
            "schema": 2,
            **fields,
        }
        assert list(parsed)[:4] == ["timestamp", "level", "event", "schema"]
