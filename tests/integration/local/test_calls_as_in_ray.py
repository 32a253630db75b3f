"""Calls, refs and objects, the ray.* functions and the runtime context: as in plain Ray.

Each body runs twice, with plain Ray and in local mode, and what the program sees must be
the same: a value, or the exception's type and message, and whether it came at
``.remote()`` or at ``ray.get``. The first class runs local mode beside the running
cluster; the table of the second runs it with Ray shut down, as users run it.
"""

from __future__ import annotations

import os
import pickle
import re
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
import ray

from raytrace_kit import debuggable, local_mode
from tests.helpers import AgainstPlainRay, Body, Remote, add, outcome


def task_too_many_args(remote: Any) -> Callable[[], Any]:
    ref = remote.remote(1, 2, 3)
    return lambda: ray.get(ref)


def task_missing_arg(remote: Any) -> Callable[[], Any]:
    ref = remote.remote(1)
    return lambda: ray.get(ref)


def task_unknown_keyword(remote: Any) -> Callable[[], Any]:
    ref = remote.remote(1, 2, c=3)
    return lambda: ray.get(ref)


TASK_ROWS = [task_too_many_args, task_missing_arg, task_unknown_keyword]


def read_var() -> str | None:
    return os.environ.get("RK_LOCAL_TEST_VAR")


@pytest.mark.usefixtures("ray_session")
class TestWithRayRunning:
    """Each body with plain Ray, then in local mode beside the running cluster."""

    @pytest.mark.parametrize("row", TASK_ROWS, ids=lambda r: r.__name__)
    def test_task_signatures_checked_at_submission(self, row: Callable[[Any], Any]) -> None:
        """Arguments that do not fit fail at .remote() with Ray's TypeError, in both."""
        plain = outcome(lambda: row(ray.remote(add)))
        with local_mode():
            local = outcome(lambda: row(debuggable(ray.remote(add))))
        assert local == plain
        assert plain[0] == "submit"

    @pytest.mark.parametrize(
        ("refs", "num_returns"),
        [pytest.param("dup", 1, id="duplicates"), pytest.param("two", 3, id="too many")],
    )
    def test_wait_rejects_as_ray_does(self, refs: str, num_returns: int) -> None:
        """ray.wait with duplicate refs or too large num_returns: Ray's ValueError, in both."""

        def body(remote: Any) -> Callable[[], Any]:
            ref = remote.remote(1, 2)
            waitables = [ref, ref] if refs == "dup" else [ref, remote.remote(3, 4)]
            ray.wait(waitables, num_returns=num_returns)
            return lambda: None

        plain = outcome(lambda: body(ray.remote(add)))
        with local_mode():
            local = outcome(lambda: body(debuggable(ray.remote(add))))
        assert local == plain

    @pytest.mark.parametrize("name", ["ref_inside_a_put_container", "refs_kept_by_an_actor"])
    def test_local_refs_inside_objects_ray_serializes(self, name: str) -> None:
        """A local ref inside what Ray itself serializes (put beside a cluster): as Ray."""
        row = globals()[name]  # a row of the table below
        plain = outcome(lambda: row(ray.remote))
        with local_mode():
            local = outcome(lambda: row(lambda target: debuggable(ray.remote(target))))
        assert local == plain
        assert plain[0] == "value"

    def test_runtime_env_vars_visible_inside_the_call(self) -> None:
        """runtime_env env_vars are set for the call, and only for it."""
        options = {"runtime_env": {"env_vars": {"RK_LOCAL_TEST_VAR": "on"}}}
        plain = ray.get(ray.remote(read_var).options(**options).remote())
        with local_mode():
            local = ray.get(debuggable(ray.remote(read_var)).options(**options).remote())
        assert local == plain == "on"
        assert "RK_LOCAL_TEST_VAR" not in os.environ


# --- what the rows call (module level, so that Ray's workers can import them) ---


def array_facts(x: np.ndarray) -> tuple[bool, int, np.ndarray]:
    return x.flags.writeable, x.ctypes.data % 64, x


def ctx_task() -> tuple[Any, ...]:
    context = ray.get_runtime_context()
    return (
        bool(re.fullmatch("[0-9a-f]{16}f{24}[0-9a-f]{8}", context.get_task_id())),
        context.get_actor_id(),
        context.get_task_name(),
        context.get_task_function_name(),
        [len(context.get_job_id()), len(context.get_node_id()), len(context.get_worker_id())],
        context.get_task_id().endswith(context.get_job_id()),
        ray.get_gpu_ids(),
    )


def aliases(a: Any, b: Any, c: Any = None) -> tuple[bool, bool, bool]:
    """Whether the call got one object for its arguments, and their values equal."""
    return a is b, a is c, a == b == c


class AsyncAliases:
    async def check(self, a: Any, b: Any, c: Any = None) -> tuple[bool, bool, bool]:
        return aliases(a, b, c)


def two_lists(flat: bool) -> list[Any]:
    return [1, "two", 3.0] if flat else [[1], ["two"]]


def bump_through(handle: Any) -> int:
    return ray.get(handle.bump.remote())  # type: ignore[no-any-return]


def call_method(method: Any) -> int:
    return ray.get(method.remote())  # type: ignore[no-any-return]


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    def bump(self) -> int:
        self.value += 1
        return self.value


def task_name() -> str | None:
    return ray.get_runtime_context().get_task_name()


class Introspect:
    def name(self) -> str | None:
        return ray.get_runtime_context().get_task_name()

    def ids(self) -> tuple[Any, ...]:
        context = ray.get_runtime_context()
        actor_id = context.get_actor_id()
        return (
            len(context.get_task_id()),
            len(actor_id),
            context.get_task_id().endswith(actor_id),
            repr(context.current_actor) == f"Actor(Introspect, {actor_id})",
            context.get_actor_name(),
            context.get_task_name(),
            context.was_current_actor_reconstructed,
        )


class Keeper:
    """An actor that keeps the refs it is given, as a cache or a pipeline stage would."""

    def __init__(self) -> None:
        self.refs: list[Any] = []

    def keep(self, refs: list[Any]) -> int:
        self.refs.extend(refs)
        return len(self.refs)

    def total(self) -> int:
        return sum(ray.get(self.refs))


class TwoArgumentError(Exception):
    """Pickles, but cannot be unpickled: its __init__ wants more than its args."""

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} ({code})")


def raise_two_argument_error() -> None:
    raise TwoArgumentError("bad input", 7)


def resource_names() -> tuple[list[str], list[str], bool]:
    """What a call sees of the cluster: resource names, and whether it has CPUs."""
    total, free = ray.cluster_resources(), ray.available_resources()
    return sorted(total), sorted(free), total.get("CPU", 0) >= 1


# --- the rows: each takes `remote` (ray.remote, or debuggable(ray.remote(...))) ---


def ref_is_an_object_ref(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: (isinstance(ref, ray.ObjectRef), repr(ref).startswith("ObjectRef("))


def ref_future(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ref.future().result(timeout=30)


def arrays_are_read_only_and_aligned(remote: Remote) -> Body:
    ref = remote(array_facts).remote(np.arange(8.0))
    put = ray.get(ray.put(np.arange(8.0)))

    def body() -> Any:
        writeable, alignment, back = ray.get(ref)
        facts = (back.flags.writeable, back.ctypes.data % 64, put.flags.writeable)
        return (writeable, alignment, *facts)

    return body


def too_large_closure(remote: Remote) -> Body:
    big = np.zeros(100 * 1024 * 1024 // 8 + 1024)

    def closes_over_big() -> int:
        return int(big.size)

    ref = remote(closes_over_big).remote()
    return lambda: ray.get(ref)


def handle_passed_to_a_task(remote: Remote) -> Body:
    counter = remote(Counter).remote(10)
    ref = remote(bump_through).remote(counter)
    return lambda: (ray.get(ref), ray.get(counter.bump.remote()))


def bound_method_passed_to_a_task(remote: Remote) -> Body:
    counter = remote(Counter).remote(0)
    ref = remote(call_method).remote(counter.bump)
    return lambda: ray.get(ref)


def runtime_context_in_a_task(remote: Remote) -> Body:
    ref = remote(ctx_task).remote()
    return lambda: ray.get(ref)


def runtime_context_in_an_actor(remote: Remote) -> Body:
    actor = remote(Introspect).options(name="introspected").remote()
    ref = actor.ids.remote()
    return lambda: ray.get(ref)


def runtime_context_in_an_unnamed_actor(remote: Remote) -> Body:
    actor = remote(Introspect).remote()
    ref = actor.ids.remote()
    return lambda: ray.get(ref)[4]  # get_actor_name(): "" when the actor has no name


def task_named_by_options(remote: Remote) -> Body:
    """``.options(name=...)`` names the task: its runtime context says so (and its events)."""
    ref = remote(task_name).options(name="custom").remote()
    return lambda: ray.get(ref)


def method_named_by_options(remote: Remote) -> Body:
    actor = remote(Introspect).remote()
    named, plain = actor.name.options(name="mcustom").remote(), actor.name.remote()
    return lambda: ray.get([named, plain])


def cancel_a_finished_call(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    ray.get(ref)
    # Ray 2.40 to 2.60 abort the driver if ray.cancel comes while the call's reply is still
    # being processed, after ray.get has its value ("Check failed: ... Tried to complete
    # task that was not pending", one run in a few hundred). The replies are processed in
    # order: once a later call's is, this one's is done, and the call finished for Ray too.
    ray.get(remote(add).remote(0, 0))
    return lambda: (ray.cancel(ref), ray.get(ref))


def named_actor_is_listed(remote: Remote) -> Body:
    counter = remote(Counter).options(name="listed-counter").remote(0)
    ray.get(counter.bump.remote())  # alive: Ray lists actors once they are
    return lambda: ("listed-counter" in ray.util.list_named_actors(), counter is not None)


def named_actor_ends_with_its_last_handle(remote: Remote) -> Body:
    counter = remote(Counter).options(name="forgotten-counter").remote(0)
    ray.get(counter.bump.remote())
    del counter  # not detached: Ray ends the actor with its last handle
    deadline = time.monotonic() + 20
    while "forgotten-counter" in ray.util.list_named_actors() and time.monotonic() < deadline:
        time.sleep(0.1)
    return lambda: "forgotten-counter" in ray.util.list_named_actors()


def get_rejects_a_non_ref(remote: Remote) -> Body:
    del remote
    return lambda: ray.get(42)


def wait_rejects_a_single_ref(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ray.wait(ref)


def put_of_a_ref(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ray.put(ref)


def ref_pickled_and_back_in_this_process(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ray.get(pickle.loads(pickle.dumps(ref)))


def ref_inside_a_put_container(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ray.get(ray.get(ray.put([ref]))[0])


def refs_kept_by_an_actor(remote: Remote) -> Body:
    keeper = remote(Keeper).remote()
    kept = keeper.keep.remote([remote(add).remote(1, 2), remote(add).remote(3, 4)])
    return lambda: (ray.get(kept), ray.get(keeper.total.remote()))


def exception_that_cannot_be_unpickled(remote: Remote) -> Body:
    ref = remote(raise_two_argument_error).remote()
    return lambda: ray.get(ref)


def one_list_as_three_arguments(remote: Remote) -> Body:
    """Ray serializes each argument apart: one list passed thrice arrives as three."""
    flat, nested = two_lists(flat=True), two_lists(flat=False)
    refs = [remote(aliases).remote(x, x, c=x) for x in (flat, nested)]
    return lambda: ray.get(refs)


def one_list_as_three_arguments_of_an_async_method(remote: Remote) -> Body:
    actor = remote(AsyncAliases).remote()
    flat, nested = two_lists(flat=True), two_lists(flat=False)
    refs = [actor.check.remote(x, x, c=x) for x in (flat, nested)]
    return lambda: ray.get(refs)


def a_value_got_twice(remote: Remote) -> Body:
    """Each ray.get of a list deserializes a fresh one: mutating one changes no other."""
    refs = [remote(two_lists).remote(flat) for flat in (True, False)] + [ray.put([1, 2])]

    def body() -> Any:
        first = ray.get(refs)
        for value in first:
            value.append("mutated")
        return ray.get(refs)

    return body


def cluster_resources_inside_a_call(remote: Remote) -> Body:
    ref = remote(resource_names).remote()
    return lambda: ray.get(ref)


def put_of_an_unserializable_value(remote: Remote) -> Body:
    del remote
    return lambda: ray.put(threading.Lock())


@pytest.mark.compat
class TestWithRayShutDown(AgainstPlainRay):
    """Each row with plain Ray first, then in strict local mode with Ray shut down."""

    ROWS: ClassVar[list[Callable[..., Body]]] = [
        ref_is_an_object_ref,
        ref_future,
        arrays_are_read_only_and_aligned,
        too_large_closure,
        handle_passed_to_a_task,
        bound_method_passed_to_a_task,
        runtime_context_in_a_task,
        runtime_context_in_an_actor,
        runtime_context_in_an_unnamed_actor,
        task_named_by_options,
        method_named_by_options,
        cancel_a_finished_call,
        named_actor_is_listed,
        named_actor_ends_with_its_last_handle,
        get_rejects_a_non_ref,
        wait_rejects_a_single_ref,
        put_of_a_ref,
        put_of_an_unserializable_value,
        ref_pickled_and_back_in_this_process,
        ref_inside_a_put_container,
        refs_kept_by_an_actor,
        exception_that_cannot_be_unpickled,
        cluster_resources_inside_a_call,
        one_list_as_three_arguments,
        one_list_as_three_arguments_of_an_async_method,
        a_value_got_twice,
    ]
