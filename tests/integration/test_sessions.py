"""Sessions: a run's records read back, joined per call, from wherever they are."""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timezone
from pathlib import Path

import pytest
import ray
from ray.exceptions import WorkerCrashedError

import raytrace_kit
from raytrace_kit import EventsNotFoundError, debuggable, open_session
from tests import helpers


@debuggable
@ray.remote(max_retries=0)
def grow_then_die(mib: int) -> None:
    hold = bytearray(mib * 1024 * 1024)
    hold[::4096] = b"x" * len(hold[::4096])  # touch every page: RSS grows
    os.kill(os.getpid(), signal.SIGKILL)


KEPT: list[bytearray] = []  # in the worker: what a leaking call leaves behind


@debuggable
@ray.remote
def grow(mib: int) -> int:
    hold = bytearray(mib * 1024 * 1024)
    hold[::4096] = b"x" * len(hold[::4096])
    KEPT.append(hold)  # a leak: still held when the call ends
    return len(hold)


@debuggable(profile="cprofile")
@ray.remote
def profiled(n: int) -> int:
    return sum(range(n))


def _mine(calls: list[raytrace_kit.Call]) -> list[raytrace_kit.Call]:
    return [c for c in calls if c.started >= helpers.window_start()]


@pytest.mark.usefixtures("ray_session")
class TestSessions:
    def test_interrupted_call_is_a_call_with_its_start(self) -> None:
        """A worker killed mid-call leaves a call with status interrupted, its start kept."""
        with pytest.raises(WorkerCrashedError):
            ray.get(grow_then_die.remote(8))
        (call,) = _mine(open_session().calls(function="grow_then_die"))
        assert call.status == "interrupted"
        assert call.ended is None
        assert call.rss_start_bytes is not None
        assert call.rss_start_bytes > 0
        assert call.task_name == ("grow_then_die" if helpers.TASK_NAMES else None)

    def test_a_calls_own_memory_growth(self) -> None:
        """rss_growth_bytes is what the process grew by during the call."""
        assert ray.get(grow.remote(64)) == 64 * 1024 * 1024
        (call,) = _mine(open_session().calls(function="grow"))
        assert call.status == "ok"
        assert call.rss_growth_bytes is not None
        assert call.rss_growth_bytes >= 60 * 1024 * 1024

    def test_latest_is_the_running_session(self) -> None:
        """'latest' finds this machine's newest Ray session, as Ray resolves it."""
        ray.get(grow.remote(1))
        latest = open_session("latest")
        assert Path(helpers.ray_session_dir()).parent in latest.root.parents
        assert _mine(latest.calls(function="grow"))

    def test_profiles_are_listed_with_their_sidecars(self) -> None:
        """A profiled call's capture is in profiles(), its sidecar next to it."""
        ray.get(profiled.remote(1000))
        (call,) = _mine(open_session().calls(function="profiled"))
        assert call.profile_path is not None
        captures = open_session().profiles()
        assert Path(call.profile_path) in captures
        sidecar = json.loads(Path(call.profile_path).with_suffix(".json").read_text())
        assert sidecar["call_id"] == call.call_id

    def test_tables(self) -> None:
        """to_pandas() and to_arrow(): one row per call, the Call's fields as columns."""
        ray.get([grow.remote(1), grow.remote(2)])
        session = open_session()
        frame = session.to_pandas()
        table = session.to_arrow()
        calls = session.calls()
        assert len(frame) == table.num_rows == len(calls)
        assert {"call_id", "function", "status", "rss_growth_bytes"} <= set(frame.columns)
        assert list(frame["call_id"]) == [c.call_id for c in calls]
        assert table.column("call_id").to_pylist() == [c.call_id for c in calls]


class TestSources:
    def test_missing_path_is_an_error_naming_it(self, tmp_path: Path) -> None:
        with pytest.raises(EventsNotFoundError, match="nowhere"):
            open_session(tmp_path / "nowhere")

    def test_one_file_and_schema_one_events(self, tmp_path: Path) -> None:
        """A single file opens; events of schema 1 (no start memory) still join."""
        lines = [
            {"timestamp": "2026-01-01T00:00:00.000000+00:00", "level": "info",
             "event": "call.start", "call_id": "aa", "function": "m.f", "pid": 1},
            {"timestamp": "2026-01-01T00:00:01.000000+00:00", "level": "info",
             "event": "call.end", "call_id": "aa", "function": "m.f", "pid": 1,
             "duration_s": 1.0, "status": "ok", "rss_bytes": 10},
            {"timestamp": "2026-01-01T00:00:02.000000+00:00", "level": "info",
             "event": "call.start", "call_id": "bb", "function": "m.g", "pid": 1},
            '{"timestamp": "2026-01-01T00:00:03.0',  # cut by a killed process
        ]  # fmt: skip
        path = tmp_path / "events-x-1.jsonl"
        path.write_text("".join(
            (line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines
        ))  # fmt: skip
        calls = open_session(path).calls()
        assert [(c.call_id, c.status) for c in calls] == [("aa", "ok"), ("bb", "interrupted")]
        assert calls[0].started == "2026-01-01T00:00:00.000000+00:00"
        assert calls[0].rss_start_bytes is None
        assert calls[0].rss_growth_bytes is None
        assert [e["event"] for e in open_session(path).events(function="f")] == [
            "call.start",
            "call.end",
        ]


def _line(event: str, call_id: str, second: int, **fields: object) -> str:
    return json.dumps(
        {"timestamp": f"2026-01-01T00:00:0{second}.000000+00:00", "level": "info",
         "event": event, "call_id": call_id, "function": "m.f", **fields},
        separators=(",", ":"),
    ) + "\n"  # fmt: skip


class TestJoins:
    def test_a_call_that_spans_a_rotation_joins(self, tmp_path: Path) -> None:
        """Its start in the rotated file, its end in the current one: one call, not two."""
        (tmp_path / "events-ab-7.1.jsonl").write_text(_line("call.start", "c1", 0))
        (tmp_path / "events-ab-7.jsonl").write_text(
            _line("call.end", "c1", 1, status="ok", duration_s=1.0)
        )
        calls = open_session(tmp_path).calls()
        assert [(c.call_id, c.status, c.started[:19]) for c in calls] == [
            ("c1", "ok", "2026-01-01T00:00:00")
        ]

    def test_the_same_files_twice_give_each_call_once(self, tmp_path: Path) -> None:
        """A folder copied twice (collected twice, by hand) does not double the calls."""
        lines = _line("call.start", "c1", 0) + _line("call.end", "c1", 1, status="ok")
        for copy in ("a", "b"):
            (tmp_path / copy).mkdir()
            (tmp_path / copy / "events-ab-7.jsonl").write_text(lines)
        assert [c.call_id for c in open_session(tmp_path).calls()] == ["c1"]

    def test_user_events_named_call_something_are_not_calls(self, tmp_path: Path) -> None:
        """get_logger().info("call.stats") inside a call is an event, not a start or end."""
        (tmp_path / "events-ab-7.jsonl").write_text(
            _line("call.start", "c1", 0)
            + _line("call.stats", "c1", 1)
            + _line("call.extra", "c1", 2)
            + _line("call.end", "c1", 3, status="ok")
        )
        (call,) = open_session(tmp_path).calls()
        assert (call.status, call.started[:19]) == ("ok", "2026-01-01T00:00:00")

    def test_time_filters_take_z_and_datetimes(self, tmp_path: Path) -> None:
        (tmp_path / "events-ab-7.jsonl").write_text(
            _line("call.start", "c1", 0) + _line("call.end", "c1", 2, status="ok")
        )
        session = open_session(tmp_path)
        since = datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
        assert [e["event"] for e in session.events(since=since)] == ["call.end"]
        assert [e["event"] for e in session.events(until="2026-01-01T00:00:01Z")] == ["call.start"]
