"""Tests for the worker side: every execution is one instrumented call, as Ray runs it."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import pytest
import ray
from ray.exceptions import RayTaskError, WorkerCrashedError

import raytrace_kit
from raytrace_kit import debuggable
from tests.helpers import events_of, window_start

pytestmark = pytest.mark.usefixtures("ray_session")


class BadInputError(ValueError):
    """A user exception type."""


@debuggable
@ray.remote(max_retries=0)
def fail(message: str) -> None:
    raise BadInputError(message)


@debuggable
@ray.remote
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.n = start

    def incr(self) -> int:
        self.n += 1
        return self.read()  # a call to its own method: part of this call, not a new one

    def read(self) -> int:
        return self.n

    async def slow_read(self, delay: float) -> int:
        await asyncio.sleep(delay)
        return self.n

    def numbers(self, k: int):
        for i in range(k):  # noqa: UP028 -- Ray sends into generators; range() cannot take it
            yield i


class LuckySecond:
    """Its method fails on its first call and works on the second."""

    def __init__(self) -> None:
        self.calls = 0

    def now(self) -> int:
        self.calls += 1
        if self.calls == 1:
            raise BadInputError("first attempt")
        return self.calls

    async def later(self) -> int:
        return self.now()


class TestActors:
    """Actor creation and every method call are instrumented in the actor process."""

    def test_init_and_methods(self) -> None:
        """__init__ is an actor_init call, methods are actor_method calls."""
        counter = Counter.remote(10)
        assert ray.get(counter.incr.remote()) == 11
        ends = events_of(Counter, "call.end")
        assert [(e["kind"], e["function"].rsplit(".", 1)[1]) for e in ends] == [
            ("actor_init", "__init__"),
            ("actor_method", "incr"),
        ]
        actor_id = counter._actor_id.hex()
        assert {e["actor_id"] for e in ends} == {actor_id}
        ray.kill(counter)

    def test_named_actor_fetched_later_stays_instrumented(self) -> None:
        """A handle from ray.get_actor(name) calls the instrumented class."""
        counter = Counter.options(name="test-named-counter").remote()
        again = ray.get_actor("test-named-counter")
        assert ray.get(again.incr.remote()) == 1
        methods = [e["function"] for e in events_of(Counter, "call.end")]
        assert methods[-1].endswith("Counter.incr")
        ray.kill(counter)

    def test_async_actor_concurrent_calls_keep_their_own_context(self) -> None:
        """Interleaved async calls each get their own call_id and task_id."""
        counter = Counter.remote()
        # Long enough that all four have started before the shortest ends, even on a
        # loaded machine.
        refs = [counter.slow_read.remote(0.8 - i * 0.15) for i in range(4)]
        assert ray.get(refs) == [0, 0, 0, 0]
        ends = [e for e in events_of(Counter, "call.end") if e["kind"] == "actor_method"]
        starts = [e for e in events_of(Counter, "call.start") if e["kind"] == "actor_method"]
        assert len(ends) == 4
        assert {e["call_id"] for e in ends} == {e["call_id"] for e in starts}
        assert len({e["task_id"] for e in ends}) == 4
        # They overlapped: every call started before the first one ended.
        first_end = min(e["timestamp"] for e in ends)
        assert all(s["timestamp"] < first_end for s in starts)
        ray.kill(counter)

    def test_generator_method(self) -> None:
        """A generator method is one call that ends when the generator is exhausted."""
        counter = Counter.remote()
        assert [ray.get(r) for r in counter.numbers.remote(3)] == [0, 1, 2]
        ends = [e for e in events_of(Counter, "call.end") if e["function"].endswith("numbers")]
        assert len(ends) == 1
        assert ends[0]["status"] == "ok"
        ray.kill(counter)

    def test_threaded_actor_8x500_calls_leave_8000_well_formed_lines(self) -> None:
        """8 threads x 500 calls: every line parses, every call has a start and an end."""

        @debuggable
        @ray.remote(max_concurrency=8)
        class Busy:
            def work(self, i: int) -> int:
                raytrace_kit.get_logger().debug("work.step", thread=threading.get_ident())
                return i

        busy = Busy.remote()
        ray.get(busy.work.remote(-1))  # let the actor start before timing the burst

        def caller(t: int) -> list[int]:
            return ray.get([busy.work.remote(t * 1000 + i) for i in range(500)])

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(caller, range(8)))
        assert [sorted(r) for r in results] == [
            list(range(t * 1000, t * 1000 + 500)) for t in range(8)
        ]
        pid = next(e["pid"] for e in events_of(Busy, "call.start"))
        files = list(raytrace_kit.log_dir().glob(f"events-*-{pid}.jsonl"))
        lines = files[0].read_bytes().splitlines()
        work = [line for line in lines if b'"Busy.work"' in line or b".Busy.work" in line]
        calls = [line for line in work if b'"call.' in line]
        assert len(calls) == 2 * 4001  # 8000 from the burst, 2 from the warm-up call
        events = [
            e for e in raytrace_kit.read_events(files[0]) if e["function"].endswith(".Busy.work")
        ]
        starts = {e["call_id"] for e in events if e["event"] == "call.start"}
        ends = {e["call_id"] for e in events if e["event"] == "call.end"}
        assert len(starts) == 4001
        assert starts == ends
        steps = [e for e in events if e["event"] == "work.step"]
        assert len(steps) == 4001
        assert {e["call_id"] for e in steps} == starts  # each step carries its own call
        ray.kill(busy)


class TestErrorsAndRetries:
    """Failures look exactly as they do in plain Ray, and each attempt is logged."""

    def test_exception_type_and_traceback(self) -> None:
        """ray.get raises RayTaskError that is also the user's type, user frames kept."""
        with pytest.raises(BadInputError, match="bad row 7") as info:
            ray.get(fail.remote("bad row 7"))
        assert isinstance(info.value, RayTaskError)
        text = "".join(traceback.format_exception(info.value))
        assert "in fail" in text
        assert "raise BadInputError(message)" in text
        (end,) = events_of(fail, "call.end")
        assert end["status"] == "error"
        assert end["level"] == "error"
        assert end["error_type"] == "BadInputError"
        assert end["error"] == "bad row 7"

    def test_retries_log_every_attempt(self) -> None:
        """max_retries with retry_exceptions: one start/end pair per attempt."""

        @debuggable
        @ray.remote(max_retries=2, retry_exceptions=True)
        def always_fails() -> None:
            raise BadInputError("again")

        with pytest.raises(BadInputError):
            ray.get(always_fails.remote())
        ends = events_of(always_fails, "call.end")
        assert [e["attempt"] for e in ends] == [0, 1, 2]
        assert len({e["task_id"] for e in ends}) == 1
        assert len({e["call_id"] for e in ends}) == 3

    def test_retry_then_success(self) -> None:
        """A retried task that succeeds on its second attempt returns its result."""

        @debuggable
        @ray.remote(max_retries=1, retry_exceptions=[BadInputError])
        def second_time_lucky(marker: str) -> str:
            if not os.path.exists(marker):
                open(marker, "w").close()
                raise BadInputError("first attempt")
            return "ok"

        marker = f"/tmp/raytrace-kit-retry-{os.getpid()}-{time.time_ns()}"  # noqa: S108
        try:
            assert ray.get(second_time_lucky.remote(marker)) == "ok"
        finally:
            os.unlink(marker)
        ends = events_of(second_time_lucky, "call.end")
        assert [(e["attempt"], e["status"]) for e in ends] == [(0, "error"), (1, "ok")]

    @pytest.mark.parametrize("kind", ["async", "threaded", "plain"])
    def test_actor_method_retries_are_numbered(self, kind: str) -> None:
        """An actor method saved by its retry: attempts 0 then 1, one task, in any actor.

        Ray 2.60's own attempt number reads 0 on every attempt here, in each kind of actor:
        the actor's process counts its retries. The report then says the retry saved it.
        """
        actor = debuggable(ray.remote(max_task_retries=2)(LuckySecond)).options(
            max_concurrency=4 if kind == "threaded" else 1
        )
        handle = actor.remote()
        method = handle.later if kind == "async" else handle.now
        assert ray.get(method.options(retry_exceptions=True).remote()) == 2
        ends = [e for e in events_of(LuckySecond, "call.end") if e["kind"] == "actor_method"]
        assert [(e["attempt"], e["status"]) for e in ends] == [(0, "error"), (1, "ok")]
        assert len({e["task_id"] for e in ends}) == 1
        overview = raytrace_kit.report(since=window_start()).overview  # this test's calls
        assert (overview["failed"], overview["failed_tasks"], overview["retried"]) == (1, 0, 1)

    def test_actor_method_error(self) -> None:
        """An actor method's exception reaches the caller unchanged and is logged."""

        @debuggable
        @ray.remote
        class Fragile:
            def explode(self) -> None:
                raise KeyError("missing")

        fragile = Fragile.remote()
        with pytest.raises(KeyError):
            ray.get(fragile.explode.remote())
        assert ray.get(fragile.__ray_ready__.remote())  # the actor lives on
        end = events_of(Fragile, "call.end")[-1]
        assert (end["status"], end["error_type"]) == ("error", "KeyError")
        ray.kill(fragile)

    def test_sigkill_mid_call_leaves_call_start_on_disk(self) -> None:
        """A worker killed by SIGKILL (as by the OOM killer) already wrote call.start."""

        @debuggable
        @ray.remote(max_retries=0)
        def hang() -> None:
            time.sleep(60)

        ref = hang.remote()
        deadline = time.monotonic() + 30
        while not (starts := events_of(hang, "call.start")):
            assert time.monotonic() < deadline, "call.start never appeared"
            time.sleep(0.05)
        os.kill(starts[0]["pid"], signal.SIGKILL)
        with pytest.raises(WorkerCrashedError):
            ray.get(ref, timeout=30)
        assert events_of(hang, "call.end") == []
        assert len(events_of(hang, "call.start")) == 1


class Base:
    def inherited(self) -> str:
        return "base"

    def overridden(self) -> str:
        return "base"


class TestClassShapes:
    """Ray's class features keep working on an instrumented actor class."""

    def test_ray_method_options_and_concurrency_groups(self) -> None:
        """@ray.method(num_returns=..., concurrency_group=...) still apply."""

        @debuggable
        @ray.remote(concurrency_groups={"io": 2})
        class Tuned:
            @ray.method(num_returns=2)
            def pair(self) -> tuple[int, int]:
                return 1, 2

            @ray.method(concurrency_group="io")
            def io(self) -> str:
                return threading.current_thread().name

        tuned = Tuned.remote()
        refs = tuned.pair.remote()
        assert isinstance(refs, list)
        assert ray.get(refs) == [1, 2]
        assert ray.get(tuned.io.remote()) != threading.current_thread().name
        assert len(events_of(Tuned, "call.end")) == 3
        ray.kill(tuned)

    def test_inheritance_static_class_methods_and_properties(self) -> None:
        """Inherited and overridden methods are instrumented; other members untouched."""

        @debuggable
        @ray.remote
        class Child(Base):
            scale = 3

            def overridden(self) -> str:
                return "child"

            @staticmethod
            def static(x: int) -> int:
                return x + 1

            @classmethod
            def klass(cls, x: int) -> int:
                return x * cls.scale

            @property
            def prop(self) -> int:
                return 5

            def uses_all(self) -> tuple[int, int, int]:
                return self.static(1), self.klass(2), self.prop

        child = Child.remote()
        assert ray.get(child.inherited.remote()) == "base"
        assert ray.get(child.overridden.remote()) == "child"
        assert ray.get(child.uses_all.remote()) == (2, 6, 5)
        names = [e["function"].rsplit(".", 1)[1] for e in events_of(Child, "call.end")]
        assert names == ["__init__", "inherited", "overridden", "uses_all"]
        ray.kill(child)

    def test_exit_actor_ends_the_actor_as_in_ray(self) -> None:
        """ray.actor.exit_actor() inside a method ends the actor; the call is logged."""

        @debuggable
        @ray.remote
        class Quitter:
            def quit(self) -> None:
                ray.actor.exit_actor()

        quitter = Quitter.remote()
        ray.get(quitter.__ray_ready__.remote())
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(quitter.quit.remote())
        end = events_of(Quitter, "call.end")[-1]
        assert end["function"].endswith("Quitter.quit")
        assert end["status"] == "error"
