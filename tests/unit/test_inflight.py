"""Unit tier: what a node's event files hold in flight (no Ray).

The files are written with the writer's own renderers, as processes write them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from raytrace_kit._output import encode, submissions
from raytrace_kit._process import ProcessIdentity
from raytrace_kit._reports.stuck import in_flight, started_or_ended

NODE = "ab" * 28


def identity(pid: int) -> ProcessIdentity:
    return ProcessIdentity("01000000", NODE, "cd" * 28, pid, is_worker=True)


def members(call_id: str, task_id: str, pid: int, function: str = "m.f") -> str:
    return encode.call_members(
        call_id=call_id,
        spec_fragment=encode.members({"function": function, "kind": "task"}),
        mode="ray", task_id=task_id, actor_id=None, identity=identity(pid), attempt=0,
    )  # fmt: skip


def start(call_id: str, task_id: str, pid: int) -> bytes:
    return encode.call_line("call.start", "info", members(call_id, task_id, pid))


def end(call_id: str, task_id: str, pid: int, seconds: float = 0.5) -> bytes:
    tail = encode.end_members(seconds, None, 0.1, figures=(1, 1, 1))
    return encode.call_line("call.end", "info", members(call_id, task_id, pid), tail)


def submit(
    task_id: str, function: str = "m.f", kind: str = "task", actor_id: str | None = None,
    pid: int | None = None, **actor: object,
) -> bytes:  # fmt: skip
    """A submission by this (live) process, or by ``pid``."""
    prefix = submissions.submit_prefix(function, kind, {"CPU": 1.0}, None, actor or None)
    return submissions.submit_line(
        time.time(), prefix, task_id, actor_id, None, identity(pid or os.getpid()),
        "/app/job.py:3", None,
    )  # fmt: skip


def task(n: int) -> str:
    return f"{n:016x}" + "f" * 24 + "01000000"


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


class TestInFlight:
    """Running calls live here; submissions not started; the last stuck event of each."""

    def test_running_pending_and_done(self, tmp_path: Path) -> None:
        """A start without end in a live process runs; a dead one's does not; ends are done."""
        me, gone = os.getpid(), dead_pid()
        stuck = encode.call_line(
            "call.stuck", "warning", members("c" * 16, task(3), me),
            encode.stuck_members(61.0, 60.0, 1, "MainThread",
                                 [("/app/job.py", 9, "f", "time.sleep(3600)")], None),
        )  # fmt: skip
        (tmp_path / f"events-{NODE[:12]}-{me}.jsonl").write_bytes(
            start("a" * 16, task(1), me) + end("a" * 16, task(1), me)
            + start("c" * 16, task(3), me) + stuck
        )  # fmt: skip
        (tmp_path / f"events-{NODE[:12]}-{gone}.jsonl").write_bytes(start("b" * 16, task(2), gone))
        (tmp_path / f"events-{NODE[:12]}-1.jsonl").write_bytes(
            submit(task(1)) + submit(task(2)) + submit(task(3)) + submit(task(4))
            + submit(task(5), "m.A.__init__", "actor_init", "aa" * 16, max_concurrency=3,
                     **{"async": False})
            + submit(task(6), pid=gone) + submit(task(7))
            + submissions.cancel_line(time.time(), task(7), False, identity(me))
        )  # fmt: skip
        found = in_flight([tmp_path])
        assert [c["call_id"] for c in found["running"]] == ["c" * 16]
        # 1 ended, 2 started and died: neither is in flight; 3 runs; 4 and 5 never started;
        # 6's submitter is gone (Ray cancels its calls); 7 was cancelled.
        assert sorted(r["task_id"] for r in found["submissions"]) == [task(3), task(4), task(5)]
        assert [s["call_id"] for s in found["stuck"]] == ["c" * 16]
        assert found["stuck"][0]["stack"] == [["/app/job.py", 9, "f", "time.sleep(3600)"]]
        assert found["actors"] == {
            "aa" * 16: {"function": "m.A.__init__", "max_concurrency": 3, "async": False}
        }
        assert (found["ended"], found["dead"]) == (1, 1)
        assert found["durations"] == {"m.f": [0.5]}

    def test_started_or_ended_answers_for_given_tasks(self, tmp_path: Path) -> None:
        """The second phase: which of these tasks ran (or run) in this directory."""
        me = os.getpid()
        (tmp_path / f"events-{NODE[:12]}-{me}.jsonl").write_bytes(
            start("a" * 16, task(1), me) + end("a" * 16, task(1), me) + start("b" * 16, task(2), me)
        )
        assert started_or_ended([tmp_path], [task(1), task(2), task(9)]) == [task(1), task(2)]
