"""``--follow`` (``_reports.otel.follow``): spans leave as calls end, read round by round.

The files are written by the kit's writer while the follower reads them, between rounds,
as a running program's processes would; times are now, so a live pid counts as running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import raytrace_kit
from raytrace_kit._reports.otel import follow
from raytrace_kit._reports.otel.follow import GRACE_ROUNDS, Follower
from raytrace_kit._reports.otel.spans import Resources, Span
from tests import helpers
from tests.otel_runs import ORIGIN, Process, task_of
from tests.otlp import receiver
from tests.unit.test_otel_export import dead_pid, trace_of

ROOT, CHILD = "a000000000000001", "b000000000000001"
ORPHAN, LATE = "c000000000000001", "d000000000000001"


def now() -> float:
    """Now, as seconds after the runs' origin (what Process takes)."""
    return time.time() - ORIGIN


def follower(directory: Path) -> Follower:
    session = raytrace_kit.open_session(directory)
    return Follower(session, Resources())


def by_id(spans: list[Span]) -> dict[str, Span]:
    return {span.span_id.hex(): span for span in spans}


@pytest.fixture
def root(tmp_path: Path) -> Process:
    """This process runs the root call (so it is alive while the tests run)."""
    process = Process(tmp_path, os.getpid())
    process.start(ROOT, "jobs.root", now())
    return process


class TestRounds:
    """A span leaves a round after its end was read, once its chain to its root is known."""

    def test_a_child_leaves_before_its_running_parent(self, tmp_path: Path, root: Process) -> None:
        reader = follower(tmp_path)
        assert reader.poll() == []
        child = Process(tmp_path, 101)
        child.call(CHILD, "jobs.child", now(), now() + 0.01, parent=(ROOT, task_of(ROOT)))
        assert reader.poll() == []  # read this round: it waits one
        (span,) = reader.poll()
        assert span.span_id.hex() == CHILD
        assert span.parent_span_id.hex() == ROOT
        assert span.trace_id.hex() == trace_of(task_of(ROOT))
        root.end(ROOT, now(), 1.0)
        reader.poll()
        (span,) = reader.poll()
        assert span.span_id.hex() == ROOT
        assert reader.running == 0

    def test_a_parent_never_recorded_holds_a_span_only_so_long(self, tmp_path: Path) -> None:
        reader = follower(tmp_path)
        orphan = Process(tmp_path, 101)
        orphan.call(ORPHAN, "jobs.child", now(), now(), parent=("9" * 16, task_of("elsewhere")))
        for _ in range(GRACE_ROUNDS):  # the round that reads it, and GRACE_ROUNDS - 1 more
            assert reader.poll() == []
        (span,) = reader.poll()
        assert span.trace_id.hex() == trace_of(task_of("elsewhere"))  # its parent's task

    def test_a_rotated_file_is_read_to_its_end(self, tmp_path: Path, root: Process) -> None:
        """A call started before its file was rotated joins its end after it."""
        reader = follower(tmp_path)
        child = Process(tmp_path, 101)
        child.start(LATE, "jobs.child", now(), parent=(ROOT, task_of(ROOT)))
        reader.poll()
        child.log(LATE, "halfway", now())
        child.close()
        child.path.rename(child.path.with_name(child.path.stem + ".1.jsonl"))
        began = child.members
        again = Process(tmp_path, 101)
        again.members = began
        again.end(LATE, now(), 0.5)
        reader.poll()
        (span,) = reader.poll()
        assert span.span_id.hex() == LATE
        assert [event.name for event in span.events] == ["halfway"]
        assert span.end_ns > span.start_ns > 0


class TestInterrupted:
    """A call without an end is a span once its process is gone; a running one waits."""

    def test_gone_two_rounds_in_a_row(self, tmp_path: Path, root: Process) -> None:
        reader = follower(tmp_path)
        dead = Process(tmp_path, dead_pid())
        dead.start(CHILD, "jobs.crash", now(), parent=(ROOT, task_of(ROOT)))
        dead.log(CHILD, "last.words", now() + 0.001)
        assert reader.poll() == []
        (span,) = reader.poll()
        assert span.span_id.hex() == CHILD
        assert span.status_code == 2
        assert span.status_message.startswith("interrupted")
        assert [event.name for event in span.events] == ["last.words"]
        assert reader.running == 1  # the root: its process (this one) runs

    def test_the_end_of_the_run_sends_what_is_held(self, tmp_path: Path, root: Process) -> None:
        """Ctrl-C (KeyboardInterrupt) sends the spans read, and no running call."""
        child = Process(tmp_path, 101)
        child.call(CHILD, "jobs.child", now(), now(), parent=(ROOT, task_of(ROOT)))
        delivered: list[Span] = []
        rounds = iter([None])

        def wait(_seconds: float) -> None:
            if next(rounds, "stop") == "stop":
                raise KeyboardInterrupt

        follow.follow(follower(tmp_path), delivered.extend, lambda: True, wait)
        assert list(by_id(delivered)) == [CHILD]

    def test_a_run_that_ended_ends_the_follow(self, tmp_path: Path) -> None:
        dead = Process(tmp_path, dead_pid())
        dead.start(CHILD, "jobs.crash", now())
        delivered: list[Span] = []
        follow.follow(follower(tmp_path), delivered.extend, lambda: False, lambda _s: None)
        (span,) = delivered
        assert span.status_message.startswith("interrupted")


class TestTheCommand:
    """``raytrace-kit export otlp --follow``, run as a user runs it."""

    def test_it_follows_a_directory_before_the_runs_first_event(self, tmp_path: Path) -> None:
        """Started before anything is written, it waits, then sends the first call's span.

        (It used to exit at once: "no event files".)
        """
        receiving = receiver()
        collector = next(receiving)
        command = helpers.cli_command(
            "export", "otlp", str(tmp_path), "--follow", "--endpoint", collector.url
        )
        exporter = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            assert exporter.stderr is not None
            said = [exporter.stderr.readline() for _ in range(2)]
            assert "following" in said[1], said
            Process(tmp_path, os.getpid()).call(ROOT, "jobs.first", now(), now() + 0.01)
            spans = collector.wait_for(1)
            assert [(s.span.name, s.span.span_id.hex()) for s in spans] == [("jobs.first", ROOT)]
        finally:
            exporter.send_signal(signal.SIGINT)
            _, rest = exporter.communicate(timeout=60)
            receiving.close()
        assert exporter.returncode == 0, rest
