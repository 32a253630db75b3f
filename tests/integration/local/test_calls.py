"""Tasks in local mode: where they run, the arguments they get, the refs they return.

Run without Ray (as users run local mode), except the last class: local refs among real
ones, with Ray running.
"""

from __future__ import annotations

import os
import re
import threading
import traceback

import pytest
import ray
from ray.exceptions import RayTaskError

from raytrace_kit import LocalRef, NotSerializableError, debuggable, local_mode
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
def outer_call(x: int) -> tuple[int, int]:
    return os.getpid(), ray.get(add.remote(x, 1))


@pytest.mark.usefixtures("no_ray")
class TestCalls:
    """Calls run here, in order, with their arguments copied as Ray copies them."""

    def test_runs_in_this_process_and_thread(self) -> None:
        """Calls run synchronously in the calling thread; no cluster starts."""
        with local_mode():
            ref = where.remote(7)
            assert isinstance(ref, LocalRef)
            assert ray.get(ref) == (os.getpid(), threading.get_ident(), 7)
        assert not ray.is_initialized()

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


@pytest.mark.usefixtures("no_ray")
class TestRefs:
    """What a call returns: refs for ray.get, ray.wait and other calls; errors at ray.get."""

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
