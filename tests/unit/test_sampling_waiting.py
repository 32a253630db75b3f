"""The sampler in this process, no Ray: the running/waiting rule on real threads, the option."""

from __future__ import annotations

import os
import selectors
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from raytrace_kit import InvalidOptionError
from raytrace_kit._options import DebugOptions
from raytrace_kit._output.context import ActiveCall
from raytrace_kit._output.samples import SamplesFile
from raytrace_kit._reports.profiles import read_samples
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker.sampler import Sampler
from raytrace_kit._worker.waiting import is_waiting
from raytrace_kit.cli import run as run_command
from tests import helpers


def _innermost(thread: threading.Thread, where: Callable[[FrameType], bool]) -> FrameType:
    """The thread's innermost frame, once ``where`` holds of it (a condition, no delay)."""
    while True:
        frame = sys._current_frames().get(thread.ident or 0)
        if frame is not None and where(frame):
            return frame
        time.sleep(0)  # let the thread run: it reaches its blocking call


def _in(name: str) -> Callable[[FrameType], bool]:
    return lambda frame: any(f.f_code.co_name == name for f in _chain(frame))


def _chain(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _sleeper() -> None:
    time.sleep(3600)  # a daemon thread: ends with the test process


def _spinner(stop: threading.Event) -> None:
    total = 0
    while not stop.is_set():
        total += sum(i * i for i in range(1000))


class TestWaitingRule:
    """Each kind of wait the rule names, and a CPU loop that is running."""

    def test_time_sleep_waits(self) -> None:
        """time.sleep in the user's frame: the call's name says it waits."""
        thread = threading.Thread(target=_sleeper, daemon=True)
        thread.start()
        frame = _innermost(thread, lambda f: f.f_code is _sleeper.__code__)
        assert is_waiting(frame)

    def test_event_wait_and_lock_wait(self) -> None:
        """Event.wait (threading's code) and a ``with lock:`` that blocks."""
        event, lock = threading.Event(), threading.Lock()
        lock.acquire()

        def holder() -> None:
            with lock:  # blocks: the test holds it
                pass

        waiter = threading.Thread(target=event.wait, daemon=True)
        blocked = threading.Thread(target=holder, daemon=True)
        waiter.start()
        blocked.start()
        try:
            assert is_waiting(_innermost(waiter, lambda f: "threading" in f.f_code.co_filename))
            assert is_waiting(_innermost(blocked, lambda f: f.f_code is holder.__code__))
        finally:
            event.set()
            lock.release()
            waiter.join()
            blocked.join()

    def test_select_waits(self) -> None:
        """A selector's select (asyncio's idle loop waits there)."""
        read, write = os.pipe()
        selector = selectors.DefaultSelector()
        selector.register(read, selectors.EVENT_READ)
        thread = threading.Thread(target=selector.select, daemon=True)
        thread.start()
        try:
            assert is_waiting(_innermost(thread, _in("select")))
        finally:
            os.write(write, b"x")
            thread.join()
            selector.close()
            os.close(read)
            os.close(write)

    def test_a_warm_loops_blocking_call_waits(self) -> None:
        """A loop's ``time.sleep``, specialized (3.11 calls it from PRECALL): still a wait.

        A polling loop (``while not done: time.sleep(0.01)``, Ray Data's driver) has run its
        call many times when it is sampled; on 3.11 the thread then stops at the PRECALL.
        """
        delays = [0.0] * 500 + [3600.0]  # warm: the last sleep blocks (a daemon thread)

        def poller() -> None:
            for delay in delays:
                time.sleep(delay)

        thread = threading.Thread(target=poller, daemon=True)
        thread.start()
        frame = _innermost(
            thread, lambda f: f.f_code is poller.__code__ and f.f_locals.get("delay") == 3600.0
        )
        assert is_waiting(frame)

    def test_ray_init_waiting_for_the_gcs_waits(self) -> None:
        """ray.init's wait for its node to register (GCS calls in C): not the run's hot line."""
        import ray._private.state  # noqa: PLC0415
        import ray.experimental.internal_kv as kv  # noqa: PLC0415

        from raytrace_kit._ray_compat.waiting import waits_in_ray  # noqa: PLC0415

        assert waits_in_ray(ray._private.state.GlobalState.get_node.__code__)
        assert waits_in_ray(kv._internal_kv_get.__wrapped__.__code__)  # under Ray's client hook
        assert not waits_in_ray(ray._private.state.GlobalState.node_table.__code__)

    def test_a_cpu_loop_runs(self) -> None:
        """Python byte code computing: running."""
        stop = threading.Event()
        thread = threading.Thread(target=_spinner, args=(stop,), daemon=True)
        thread.start()
        try:
            frame = _innermost(thread, lambda f: f.f_code.co_name == "<genexpr>")
            assert not is_waiting(frame)
        finally:
            stop.set()
            thread.join()


class TestSampleOption:
    """``sample=``: True is 100 Hz; a rate must be 1 to 1000; off is None."""

    @pytest.mark.parametrize(
        ("given", "rate"), [(True, 100.0), (250, 250.0), (1.5, 1.5), (False, None), (None, None)]
    )
    def test_rates(self, given: object, rate: float | None) -> None:
        """Each accepted value, as the rate the workers sample at."""
        assert DebugOptions().replace(sample=given).sample == rate

    @pytest.mark.parametrize("given", [0, -5, 5000, "fast"])
    def test_bad_rates_name_the_fix(self, given: object) -> None:
        """Out of range or not a number: the error says what to give."""
        with pytest.raises(InvalidOptionError, match="sample"):
            DebugOptions().replace(sample=given)

    def test_run_takes_sample_with_an_optional_rate(self) -> None:
        """``run --sample SCRIPT`` is 100 Hz; ``--sample=250`` a rate; the script is not one."""
        from raytrace_kit.cli import _parser  # noqa: PLC0415

        for argv, rate in ((["run", "--sample", "app.py"], True), (["run", "--sample=250"], 250)):
            ours, rest = run_command.split_argv(argv)
            assert _parser().parse_args(ours).sample == rate
            assert rest == argv[2:]


class TestSamplerThread:
    """The sampler in this process: a CPU loop's call tagged and running, a wait waiting."""

    def test_threads_sampled_and_tagged(self, tmp_path: Path) -> None:
        """Samples are counted until enough are seen (no fixed duration), then read back."""
        out = SamplesFile(tmp_path / "samples-x-1.jsonl", {"pid": 1, "hz": 500.0})
        sampler = Sampler(out, 500.0)
        enough, idle = threading.Event(), threading.Event()

        def busy() -> None:
            call = ActiveCall({"function": "m.busy"}, "", "local", None)
            call.call_id = "call-1"
            worker_state.state.running_calls[id(call)] = call
            try:
                while not enough.is_set():
                    sum(i * i for i in range(5000))  # the hot line
            finally:
                worker_state.state.running_calls.pop(id(call))

        threads = [threading.Thread(target=busy), threading.Thread(target=idle.wait)]
        for thread in threads:
            thread.start()
        sampler.thread.start()
        try:
            helpers.wait_until(
                lambda: sum(n for (_, _, c, w), n in list(out.counts.items()) if c and not w) >= 50,
                "fifty running samples of the call",
            )
        finally:
            enough.set()
            idle.set()
            sampler.stop()
            sampler.thread.join()
            for thread in threads:
                thread.join()
        rows = read_samples([out.path])
        mine = [r for r in rows if r.call_id == "call-1"]
        assert sum(r.count for r in mine if not r.waiting) >= 50
        assert all(r.function == "m.busy" for r in mine)
        waits = [r for r in rows if r.call_id is None and r.waiting and r.stack]
        assert any(r.stack[-1].name.endswith("wait") for r in waits)  # the Event.wait thread
        assert not any(r.thread == "raytrace_kit-sampler" for r in rows)  # never itself
