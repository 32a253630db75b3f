"""Unit tier: process state, reset() and fork handling (no Ray cluster needed)."""

from __future__ import annotations

import json
import os

import pytest
import ray

import raytrace_kit
from raytrace_kit import _process, get_logger, local_mode
from raytrace_kit._local import state as local_state


class TestReset:
    """One reset() returns the kit to a fresh process's state."""

    def test_reset_removes_the_ray_hooks(self) -> None:
        """Local mode wraps ray.get; reset() puts Ray's own back."""
        original = ray.get
        with local_mode():
            assert ray.get is not original
            assert ray.get.__wrapped__ is original
        _process.reset()
        assert ray.get is original
        assert not local_state.state.active

    @pytest.mark.usefixtures("no_ray")
    def test_reset_forgets_the_fallback_dir(self) -> None:
        """Files written before a reset stay where they are; new ones go to a new dir."""
        before = raytrace_kit.log_dir()
        _process.reset()
        assert raytrace_kit.log_dir() != before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
@pytest.mark.usefixtures("no_ray")  # forking a connected Ray driver is not supported by Ray
class TestFork:
    """A forked child gets its own call ids and its own event file."""

    def test_child_has_its_own_ids_and_file(self) -> None:
        """The child's events land in a file named by its pid; call ids differ."""
        get_logger().info("parent.event")
        parent_prefix = _process.new_call_id()[:10]
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, then leave without running pytest's teardown
            try:
                get_logger().info("child.event")
                message = {"prefix": _process.new_call_id()[:10], "pid": os.getpid()}
                os.write(write, json.dumps(message).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        child = json.loads(os.read(read, 1000))
        os.close(read)
        assert child["prefix"] != parent_prefix
        events = raytrace_kit.read_events()
        by_event = {e["event"]: e["pid"] for e in events}
        assert by_event["parent.event"] == os.getpid()
        assert by_event["child.event"] == child["pid"]
        names = {p.name for p in raytrace_kit.log_dir().glob("events-*.jsonl")}
        assert f"events-nonode-{child['pid']}.jsonl" in names


class TestStartFigures:
    """A call starting right after another's end takes that end's figures; later ones read."""

    def test_back_to_back_takes_the_last_end(self) -> None:
        """Within REUSE_S of an end: its memory figures and process clock, this thread's CPU."""
        _process.end_figures(process_cpu=True)
        ended, rss, private, max_rss, process = _process.state.last_end or (0.0,) * 5
        figures = _process.start_figures(ended + _process.REUSE_S / 2, process_cpu=True)
        assert figures[:3] == (rss, private, max_rss)
        assert figures[4] == process
        assert figures[3] > 0  # this thread's CPU time, read fresh

    def test_later_starts_read_their_own(self) -> None:
        """Past REUSE_S the figures are read again (a sentinel end is not taken)."""
        _process.state.last_end = (0.0, 1, 1, 1, 0.0)
        figures = _process.start_figures(_process.REUSE_S * 2, process_cpu=True)
        assert figures[0] != 1
        assert figures[4] != 0.0

    def test_a_missing_process_clock_is_read(self) -> None:
        """An async call's end reads no process clock: a sync call after it reads its own."""
        _process.state.last_end = (0.0, 1, 1, 1, None)
        figures = _process.start_figures(0.0, process_cpu=True)
        assert figures[4] is not None
        assert figures[0] != 1


class TestShortCalls:
    """After a call under 1 ms its function's next call reads no clock and no rusage."""

    def test_which_clocks_the_next_call_reads(self) -> None:
        """Under 1 ms: neither clock; 1 to 10 ms: the thread's; 10 ms or more: both."""
        for duration, tiny, short in ((0.0005, True, True), (0.005, False, True),
                                      (0.02, False, False), (0.0001, True, True)):  # fmt: skip
            _process.ran("m.f", duration)
            state = _process.state
            assert ("m.f" in state.tiny_calls, "m.f" in state.short_calls) == (tiny, short)

    def test_a_start_right_after_an_end_reads_nothing(self) -> None:
        """No thread clock asked for: the last end's figures, and 0.0 for the clock."""
        _process.state.last_end = (10.0, 5, 4, 7, None)
        figures = _process.start_figures(10.0, process_cpu=False, thread_cpu=False)
        assert figures == (5, 4, 7, 0.0, None)

    def test_an_end_without_rusage_keeps_the_last_high_water_mark(self) -> None:
        """The RSS is read fresh (statm); the peak is the last read, raised to the RSS."""
        _process.state.last_end = (0.0, 1, 1, 2**50, None)
        rss, private, peak, thread, process = _process.end_figures(process_cpu=False, usage=False)
        assert rss is not None
        assert private is not None
        assert rss > 1
        assert private <= rss
        assert (peak, thread, process) == (2**50, 0.0, None)
        _process.state.last_end = (0.0, 1, 1, 1, None)
        rss, _, peak, _, _ = _process.end_figures(process_cpu=False, usage=False)
        assert peak == rss


class TestKitThread:
    """The kit's thread: one per process, ended by a reset (a test session starts many)."""

    @pytest.mark.usefixtures("no_ray")
    def test_a_reset_ends_it(self) -> None:
        """Started once; a reset closes its wake-up pipe and the thread returns."""
        from raytrace_kit._worker import state as worker_state  # noqa: PLC0415
        from raytrace_kit._worker import watch  # noqa: PLC0415

        watch.start()
        thread = worker_state.state.kit_thread
        assert thread is not None
        assert thread.is_alive()
        watch.start()
        assert worker_state.state.kit_thread is thread
        _process.reset()
        thread.join(timeout=30)
        assert not thread.is_alive()
