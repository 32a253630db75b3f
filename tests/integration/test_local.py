"""Tests for local mode: debuggable calls run in this process, with Ray's semantics."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
import threading
import traceback
from importlib.metadata import entry_points

import pytest
import ray
from ray.exceptions import ActorDiedError, RayTaskError

import raytrace_kit
from raytrace_kit import (
    LocalActorHandle,
    LocalRef,
    NotSerializableError,
    debuggable,
    is_local_mode,
    local_mode,
    set_local_mode,
)
from tests.helpers import events_of


class Unpicklable:
    """Holds a lock, which neither pickle nor Ray can serialize."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


@debuggable
@ray.remote(num_cpus=64, num_gpus=2)  # resources are ignored locally
def where(x: int = 0) -> tuple[int, int, int]:
    return os.getpid(), threading.get_ident(), x


@debuggable
@ray.remote
def add(a: int, b: int) -> int:
    return a + b


@debuggable
@ray.remote
def append_one(items: list[int]) -> list[int]:
    items.append(1)
    return items


@debuggable
@ray.remote
def explode(message: str) -> None:
    raise KeyError(message)


@debuggable
@ray.remote
def make_lock() -> Unpicklable:
    return Unpicklable()


@debuggable
@ray.remote
def countdown(n: int, fail_at: int = -1):
    for i in range(n, 0, -1):
        if i == fail_at:
            raise ValueError(f"failed at {i}")
        yield i


@debuggable
@ray.remote
def outer_call(x: int) -> tuple[int, int]:
    return os.getpid(), ray.get(add.remote(x, 1))


@debuggable
@ray.remote
class Counter:
    def __init__(self, start: int) -> None:
        self.n = start
        self.log: list[str] = []

    def incr(self, by: int = 1) -> int:
        self.n += by
        self.log.append(f"incr {by}")
        return self.n

    def history(self) -> list[str]:
        return self.log

    async def slow_double(self) -> int:
        await asyncio.sleep(0.01)
        raytrace_kit.get_logger().info("counter.doubling", n=self.n)
        return self.n * 2

    @ray.method(num_returns=2)
    def pair(self) -> tuple[int, int]:
        return self.n, -self.n


@debuggable
@ray.remote
class Broken:
    def __init__(self) -> None:
        raise RuntimeError("cannot start")

    def ping(self) -> str:
        return "pong"


@pytest.mark.usefixtures("no_ray")
class TestWithoutRay:
    """Local mode needs no cluster: everything works and Ray stays uninitialized."""

    def test_runs_in_this_process_and_thread(self) -> None:
        """Calls run synchronously in the calling thread; no cluster starts."""
        with local_mode():
            ref = where.remote(7)
            assert isinstance(ref, LocalRef)
            assert ray.get(ref) == (os.getpid(), threading.get_ident(), 7)
        assert not ray.is_initialized()

    def test_get_wait_put_and_refs_as_arguments(self) -> None:
        """ray.get (one or a list), ray.wait, ray.put and refs as arguments all work."""
        with local_mode():
            a = add.remote(1, 2)
            b = add.remote(a, ray.put(10))  # top-level refs are resolved
            assert ray.get([a, b]) == [3, 13]
            ready, not_ready = ray.wait([a, b], num_returns=1, timeout=0)
            assert (ready, not_ready) == ([a], [b])
            with pytest.raises(ValueError, match="num_returns"):
                ray.wait([a], num_returns=2)
        assert not ray.is_initialized()

    def test_nested_refs_stay_refs(self) -> None:
        """A ref inside a container reaches the function as a ref, as in Ray."""

        @debuggable
        @ray.remote
        def inspect_arg(box: dict[str, object]) -> str:
            return type(box["ref"]).__name__

        with local_mode():
            assert ray.get(inspect_arg.remote({"ref": add.remote(1, 1)})) == "LocalRef"

    def test_submission_order(self) -> None:
        """Calls run in the order they were made."""
        order: list[int] = []

        @debuggable
        @ray.remote
        def record(i: int) -> None:
            order.append(i)

        with local_mode(copy=False):
            refs = [record.remote(i) for i in range(5)]
            assert order == [0, 1, 2, 3, 4]
            ray.get(refs)

    def test_mutation_is_isolated_by_default(self) -> None:
        """A task mutating its argument does not change the caller's object."""
        items: list[int] = []
        with local_mode():
            assert ray.get(append_one.remote(items)) == [1]
        assert items == []

    def test_copy_false_shares_objects(self) -> None:
        """With copy=False the object itself is passed: the trade documented for speed."""
        items: list[int] = []
        with local_mode(copy=False):
            result = ray.get(append_one.remote(items))
        assert items == [1]
        assert result is items

    def test_unpicklable_argument_fails_at_submission(self) -> None:
        """An argument Ray could not serialize fails at .remote(), a TypeError naming it."""
        with local_mode(), pytest.raises(NotSerializableError, match=r"x\.lock") as info:
            where.remote(Unpicklable())
        assert isinstance(info.value, TypeError)
        assert "Could not serialize the argument" in str(info.value.__cause__)

    def test_unpicklable_result_fails_at_get(self) -> None:
        """A result Ray could not serialize fails at ray.get with a RayTaskError."""
        with local_mode():
            ref = make_lock.remote()
            with pytest.raises(RayTaskError, match="lock"):
                ray.get(ref)

    def test_exception_surfaces_at_get_with_user_frames(self) -> None:
        """No error at .remote(); at ray.get a RayTaskError that is also a KeyError."""
        with local_mode():
            ref = explode.remote("no such key")
        with pytest.raises(KeyError) as info:
            ray.get(ref)
        assert isinstance(info.value, RayTaskError)
        frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
        assert "explode" in frames
        assert "no such key" in str(info.value)

    def test_failed_dependency_propagates(self) -> None:
        """A call given a failed call's ref fails with that error, as in Ray."""
        with local_mode():
            ref = add.remote(explode.remote("upstream"), 1)
            with pytest.raises(KeyError, match="upstream"):
                ray.get(ref)

    def test_num_returns(self) -> None:
        """num_returns=N gives N refs; a wrong count fails as Ray's does."""

        @debuggable
        @ray.remote(num_returns=2)
        def two() -> tuple[int, int]:
            return 1, 2

        with local_mode():
            first, second = two.remote()
            assert ray.get([first, second]) == [1, 2]
            wrong = two.options(num_returns=3).remote()
            with pytest.raises(ValueError, match="returned 2 objects, but num_returns=3"):
                ray.get(wrong[0])

    def test_generator_gives_refs_and_fails_where_it_failed(self) -> None:
        """A generator task gives one ref per item; an error surfaces after the items."""
        with local_mode():
            assert [ray.get(r) for r in countdown.remote(3)] == [3, 2, 1]
            refs = list(countdown.remote(3, fail_at=1))
            assert [ray.get(r) for r in refs[:2]] == [3, 2]
            with pytest.raises(ValueError, match="failed at 1"):
                ray.get(refs[2])

    def test_nested_calls_run_locally(self) -> None:
        """A debuggable called from inside a local call runs locally too."""
        with local_mode():
            pid, value = ray.get(outer_call.remote(1))
        assert (pid, value) == (os.getpid(), 2)
        assert not ray.is_initialized()

    def test_events_have_mode_local(self) -> None:
        """Local calls leave call.start/call.end events with mode 'local'."""
        with local_mode():
            ray.get(add.remote(2, 2))
        start, end = events_of(add)
        assert (start["mode"], end["mode"], end["status"]) == ("local", "local", "ok")
        assert end["pid"] == os.getpid()
        # A task id of its own, in Ray's format, shared by the call's two events.
        assert re.fullmatch("[0-9a-f]{48}", end["task_id"])
        assert start["task_id"] == end["task_id"]

    def test_actor_lives_here_and_calls_run_in_order(self) -> None:
        """An actor is built in this process; calls, async methods, num_returns work."""
        with local_mode():
            counter = Counter.remote(10)
            assert isinstance(counter, LocalActorHandle)
            refs = [counter.incr.remote(i) for i in (1, 2, 3)]
            assert ray.get(refs) == [11, 13, 16]
            assert ray.get(counter.history.remote()) == ["incr 1", "incr 2", "incr 3"]
            assert ray.get(counter.slow_double.remote()) == 32
            assert ray.get(counter.pair.remote()) == [16, -16]
        ends = events_of(Counter, "call.end")
        assert [e["function"].rsplit(".", 1)[1] for e in ends] == [
            "__init__", "incr", "incr", "incr", "history", "slow_double", "pair",
        ]  # fmt: skip
        assert {e["actor_id"] for e in ends} == {ends[0]["actor_id"]}
        (log,) = [e for e in events_of(Counter) if e["event"] == "counter.doubling"]
        assert log["function"].endswith("slow_double")  # the async call's own context

    def test_named_actor_get_actor_and_kill(self) -> None:
        """ray.get_actor finds local named actors; ray.kill ends one."""
        with local_mode():
            # Held: as in Ray, a (non-detached) named actor ends with its last handle.
            counter = Counter.options(name="local-counter").remote(0)
            again = ray.get_actor("local-counter")
            assert again == counter
            assert ray.get(again.incr.remote()) == 1
            ray.kill(again)
            with pytest.raises(ActorDiedError):
                ray.get(again.incr.remote())
            with pytest.raises(ValueError, match="local-counter"):
                ray.get_actor("local-counter")

    def test_actor_creation_failure_as_in_ray(self) -> None:
        """A failing __init__ does not raise at .remote(); calls fail with ActorDiedError."""
        with local_mode():
            broken = Broken.remote()
            with pytest.raises(ActorDiedError, match="cannot start"):
                ray.get(broken.ping.remote())


class TestToggles:
    """How local mode is switched on and off."""

    def test_block_nests_and_restores_on_exceptions(self) -> None:
        """Nested blocks restore the previous state, also when the block raises."""
        assert not is_local_mode()
        with local_mode():
            assert is_local_mode()
            with local_mode(enabled=False):
                assert not is_local_mode()
            with pytest.raises(RuntimeError), local_mode(enabled=False):
                raise RuntimeError
            assert is_local_mode()
        assert not is_local_mode()

    def test_set_local_mode(self) -> None:
        """set_local_mode toggles the process-wide setting; blocks override it."""
        set_local_mode(True)
        try:
            assert is_local_mode()
            with local_mode(enabled=False):
                assert not is_local_mode()
        finally:
            set_local_mode(False)
        assert not is_local_mode()
        with pytest.raises(TypeError, match="True or False"):
            set_local_mode("yes")  # type: ignore[arg-type]

    def test_blocks_in_threads_do_not_leak(self) -> None:
        """Concurrent blocks in 8 threads each see their own setting; none leaks."""
        errors: list[str] = []
        barrier = threading.Barrier(8)

        def worker(i: int) -> None:
            enabled = i % 2 == 0
            with local_mode(enabled=enabled):
                barrier.wait()
                for _ in range(200):
                    if is_local_mode() != enabled:
                        errors.append(f"thread {i}")
                barrier.wait()
            if is_local_mode():
                errors.append(f"thread {i} after")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert not is_local_mode()

    @pytest.mark.usefixtures("no_ray")
    def test_local_true_option_runs_locally_without_a_block(self) -> None:
        """@debuggable(local=True) always runs in this process."""

        @debuggable(local=True)
        @ray.remote
        def always_here() -> int:
            return os.getpid()

        assert ray.get(always_here.remote()) == os.getpid()
        assert not ray.is_initialized()

    def test_environment_variable_at_import(self) -> None:
        """RAYTRACE_LOCAL_MODE=1 turns local mode on when raytrace_kit is imported."""
        script = "import raytrace_kit as rk, ray; print(rk.is_local_mode(), ray.is_initialized())"
        env = {**os.environ, "RAYTRACE_LOCAL_MODE": "1"}
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
        )
        assert out.stdout.split() == ["True", "False"]

    def test_pytest_plugin_fixture(self, ray_local: None) -> None:
        """The ray_local fixture (pytest11 entry point) turns local mode on for a test."""
        assert is_local_mode()
        names = {ep.value for ep in entry_points(group="pytest11")}
        assert "raytrace_kit.testing" in names


@pytest.mark.usefixtures("ray_session")
class TestWithRay:
    """With Ray running, local results mix with real refs and plain remote functions."""

    def test_local_refs_are_real_object_refs(self) -> None:
        """Local results mix with real refs in ray.get/ray.wait and plain tasks."""

        @ray.remote
        def plain_double(x: int) -> int:
            return 2 * x

        real = plain_double.remote(5)
        with local_mode():
            local = add.remote(real, 1)  # a real ref as argument, resolved
        assert isinstance(local, ray.ObjectRef)
        assert ray.get([real, local]) == [10, 11]
        ready, _ = ray.wait([local, real], num_returns=2, timeout=30)
        assert len(ready) == 2
        assert ray.get(plain_double.remote(local)) == 22

    def test_local_error_fails_plain_dependents(self) -> None:
        """A failed local call's ref fails the plain task that receives it."""

        @ray.remote
        def plain_identity(x: object) -> object:
            return x

        with local_mode():
            failed = explode.remote("local failure")
        with pytest.raises(KeyError, match="local failure"):
            ray.get(plain_identity.remote(failed))

    def test_with_debug_local_false_exempts_a_call(self) -> None:
        """Inside a block, with_debug(local=False) sends the call to a real worker."""
        with local_mode():
            pid, _, _ = ray.get(
                where.options(num_cpus=0, num_gpus=0).with_debug(local=False).remote()
            )
            here, _, _ = ray.get(where.remote())
        assert pid != os.getpid()
        assert here == os.getpid()


def _run_script(code: str, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAYTRACE_LOCAL_MODE"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONBREAKPOINT": "pdb.set_trace"},
        check=False,
    )


class TestDebuggers:
    """pdb works on local calls: breakpoints and post-mortem, driven through stdin."""

    def test_breakpoint_stops_and_continue_gives_the_result(self) -> None:
        """breakpoint() inside a remote function stops; 'p' sees locals; 'c' continues."""
        result = _run_script(
            """
            import ray
            from raytrace_kit import debuggable, local_mode

            @debuggable
            @ray.remote
            def calculate_statistics(values):
                total = sum(values)
                breakpoint()
                return total / len(values)

            with local_mode():
                print("RESULT", ray.get(calculate_statistics.remote([1, 2, 3, 6])))
            print("INITIALIZED", ray.is_initialized())
            """,
            stdin="p total\nc\n",
        )
        assert result.returncode == 0, result.stderr
        assert "(Pdb)" in result.stdout
        assert "\n12\n" in result.stdout.replace("(Pdb) ", "\n")
        assert "RESULT 3.0" in result.stdout
        assert "INITIALIZED False" in result.stdout

    @pytest.mark.parametrize("where_set", ["decorator", "block"])
    def test_post_mortem_opens_at_the_failing_frame(self, where_set: str) -> None:
        """post_mortem=True opens pdb where the exception was raised."""
        decorator = "@debuggable(post_mortem=True)" if where_set == "decorator" else "@debuggable"
        block = "local_mode()" if where_set == "decorator" else "local_mode(post_mortem=True)"
        result = _run_script(
            f"""
            import ray
            from raytrace_kit import debuggable, local_mode

            {decorator}
            @ray.remote
            def divide(a, b):
                ratio_inputs = (a, b)
                return a / b

            with {block}:
                ref = divide.remote(1, 0)
            try:
                ray.get(ref)
            except ZeroDivisionError:
                print("RAISED AT GET")
            """,
            stdin="p ratio_inputs\nq\n",
        )
        assert result.returncode == 0, result.stderr
        assert "(1, 0)" in result.stdout
        assert "RAISED AT GET" in result.stdout
