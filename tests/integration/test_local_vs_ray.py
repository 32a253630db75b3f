"""Local mode against plain Ray, the rest of issue 11: refs, objects, handles, actors, context.

Each row is one body, run twice: with plain Ray (the shared cluster, all rows first, in a
module fixture) and then in strict local mode *with Ray shut down*, as users run it. The
two outcomes (a value, or where an exception came and its type and first line) must be
equal, and local mode must not have started a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from raytrace_kit import debuggable, local_mode
from tests.helpers import start_shared_ray

# --- what the rows call (module level, so that Ray's workers can import them) ---


def add(a: int, b: int) -> int:
    return a + b


def numbers(n: int) -> Iterator[int]:
    for i in range(n):  # noqa: UP028 -- `yield from range(n)` fails in Ray (it send()s)
        yield i


def fails_after_one() -> Iterator[int]:
    yield 1
    raise ValueError("boom after one item")


def handshake(path: str) -> Iterator[str]:
    """Yields once, then waits for the consumer to answer through a file."""
    yield "first"
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError("the consumer never answered: the generator did not stream")
        time.sleep(0.01)
    yield "second"


def array_facts(x: np.ndarray) -> tuple[bool, int, np.ndarray]:
    return x.flags.writeable, x.ctypes.data % 64, x


class UnpicklableError(Exception):
    def __init__(self, lock: Any) -> None:
        super().__init__("cannot travel")
        self.lock = lock


def raises_unpicklable() -> None:
    raise UnpicklableError(threading.Lock())


def appends_then_fails(items: list[int], counter: str) -> list[int]:
    """Mutates its argument, then fails the first two attempts."""
    items.append(len(items))
    path = Path(counter)
    seen = int(path.read_text()) if path.exists() else 0
    path.write_text(str(seen + 1))
    if seen < 2:
        raise KeyError(f"attempt {seen}")
    return items


def exits() -> None:
    sys.exit(3)


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


class Gate:
    """An async actor: one call waits for a later one."""

    def __init__(self) -> None:
        self.opened: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self.opened is None:
            self.opened = asyncio.Event()
        return self.opened

    async def wait(self) -> str:
        await asyncio.wait_for(self._event().wait(), 20)
        return "opened"

    async def open(self) -> str:
        self._event().set()
        return "set"

    async def through_self(self) -> str:
        me = ray.get_runtime_context().current_actor
        return "got " + await me.open.remote()

    async def await_ref(self, refs: list[Any]) -> int:
        return await refs[0]  # type: ignore[no-any-return]

    async def slow(self) -> str:
        await asyncio.sleep(20)
        return "finished"


class OneAtATime:
    """An async actor limited to one call at a time."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def work(self, name: str) -> list[str]:
        self.log.append(f"start {name}")
        await asyncio.sleep(0.2)
        self.log.append(f"end {name}")
        return self.log


class Flaky:
    def __init__(self) -> None:
        self.calls = 0

    def work(self) -> int:
        self.calls += 1
        if self.calls < 3:
            raise ValueError(f"call {self.calls}")
        return self.calls


class Leaver:
    def leave(self) -> None:
        ray.actor.exit_actor()

    def ping(self) -> str:
        return "pong"


class Introspect:
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


# --- the rows: each takes `remote` (ray.remote, or debuggable(ray.remote(...))) ---

Remote = Callable[..., Any]
Body = Callable[[], Any]


def ref_is_an_object_ref(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: (isinstance(ref, ray.ObjectRef), repr(ref).startswith("ObjectRef("))


def ref_future(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ref.future().result(timeout=30)


def await_ref_in_async_actor(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    ref = gate.await_ref.remote([remote(add).remote(20, 22)])
    return lambda: ray.get(ref, timeout=30)


def async_call_waits_for_a_later_call(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    waiting = gate.wait.remote()
    opening = gate.open.remote()
    return lambda: ray.get([waiting, opening], timeout=30)


def async_call_awaits_its_own_actor(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    ref = gate.through_self.remote()
    return lambda: ray.get(ref, timeout=30)


def generator_is_an_object_ref_generator(remote: Remote) -> Body:
    refs = remote(numbers).remote(3)
    return lambda: (isinstance(refs, ray.ObjectRefGenerator), [ray.get(r) for r in refs])


def generator_streams(remote: Remote, tmp: Path) -> Body:
    answer = tmp / "answer"
    refs = remote(handshake).remote(str(answer))
    first = ray.get(next(refs), timeout=30)
    answer.write_text("go")
    return lambda: (first, ray.get(next(refs), timeout=30))


def generator_fails_midway(remote: Remote) -> Body:
    refs = remote(fails_after_one).remote()
    return lambda: [outcome(lambda r=r: lambda: ray.get(r)) for r in refs]


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


def unpicklable_exception(remote: Remote) -> Body:
    ref = remote(raises_unpicklable).remote()

    def body() -> Any:
        try:
            ray.get(ref)
        except UnpicklableError:
            return "the live original came back"
        return None

    return body


def handle_passed_to_a_task(remote: Remote) -> Body:
    counter = remote(Counter).remote(10)
    ref = remote(bump_through).remote(counter)
    return lambda: (ray.get(ref), ray.get(counter.bump.remote()))


def bound_method_passed_to_a_task(remote: Remote) -> Body:
    counter = remote(Counter).remote(0)
    ref = remote(call_method).remote(counter.bump)
    return lambda: ray.get(ref)


def actor_retries_with_retry_exceptions(remote: Remote) -> Body:
    flaky = remote(Flaky).options(max_task_retries=2).remote()
    ref = flaky.work.options(retry_exceptions=True).remote()
    return lambda: ray.get(ref)


def actor_does_not_retry_exceptions_by_default(remote: Remote) -> Body:
    flaky = remote(Flaky).options(max_task_retries=2).remote()
    ref = flaky.work.remote()
    return lambda: ray.get(ref)


def exit_actor_ends_the_call(remote: Remote) -> Body:
    leaver = remote(Leaver).remote()
    ref = leaver.leave.remote()
    return lambda: ray.get(ref, timeout=30)


def exit_actor_then_call(remote: Remote) -> Body:
    leaver = remote(Leaver).remote()
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(leaver.leave.remote(), timeout=30)
    return lambda: ray.get(leaver.ping.remote(), timeout=30)


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


def cancel_a_finished_call(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    ray.get(ref)
    return lambda: (ray.cancel(ref), ray.get(ref))


def cancel_a_running_async_call(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    ref = gate.slow.remote()
    time.sleep(1)
    ray.cancel(ref)
    return lambda: ray.get(ref, timeout=30)


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


def retries_get_fresh_arguments(remote: Remote, tmp: Path) -> Body:
    options = {"max_retries": 2, "retry_exceptions": [KeyError]}
    ref = remote(appends_then_fails).options(**options).remote([], str(tmp / "count"))
    return lambda: ray.get(ref)


def sys_exit_in_a_task(remote: Remote) -> Body:
    ref = remote(exits).options(max_retries=0).remote()
    return lambda: ray.get(ref, timeout=60)


def async_actor_max_concurrency_one(remote: Remote) -> Body:
    actor = remote(OneAtATime).options(max_concurrency=1).remote()
    first, second = actor.work.remote("a"), actor.work.remote("b")

    def body() -> Any:
        log = max(ray.get([first, second], timeout=30), key=len)
        # One at a time: each start is followed by its own end (in whichever order Ray
        # picked: it does not promise submission order for async actors).
        names = [entry.split()[1] for entry in log]
        return len(log), all(names[i] == names[i + 1] for i in range(0, len(names), 2))

    return body


def put_of_a_ref(remote: Remote) -> Body:
    ref = remote(add).remote(1, 2)
    return lambda: ray.put(ref)


def put_of_an_unserializable_value(remote: Remote) -> Body:
    del remote
    return lambda: ray.put(threading.Lock())


def get_of_a_list_times_out_as_a_whole(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    refs = [gate.wait.remote(), gate.wait.remote()]

    def body() -> Any:
        started = time.monotonic()
        try:
            ray.get(refs, timeout=0.5)
        except ray.exceptions.GetTimeoutError:
            return time.monotonic() - started < 0.9
        return None

    return body


ROWS: list[Callable[..., Body]] = [
    ref_is_an_object_ref,
    ref_future,
    await_ref_in_async_actor,
    async_call_waits_for_a_later_call,
    async_call_awaits_its_own_actor,
    generator_is_an_object_ref_generator,
    generator_streams,
    generator_fails_midway,
    arrays_are_read_only_and_aligned,
    too_large_closure,
    unpicklable_exception,
    handle_passed_to_a_task,
    bound_method_passed_to_a_task,
    actor_retries_with_retry_exceptions,
    actor_does_not_retry_exceptions_by_default,
    exit_actor_ends_the_call,
    exit_actor_then_call,
    runtime_context_in_a_task,
    runtime_context_in_an_actor,
    runtime_context_in_an_unnamed_actor,
    cancel_a_finished_call,
    cancel_a_running_async_call,
    named_actor_is_listed,
    named_actor_ends_with_its_last_handle,
    get_rejects_a_non_ref,
    wait_rejects_a_single_ref,
    retries_get_fresh_arguments,
    sys_exit_in_a_task,
    async_actor_max_concurrency_one,
    put_of_a_ref,
    put_of_an_unserializable_value,
    get_of_a_list_times_out_as_a_whole,
]


def outcome(body: Callable[[], Body]) -> tuple[Any, ...]:
    """("value", v), or (where it raised: "submit"/"get", type, first line of message)."""
    stage = "submit"
    try:
        pending = body()
        stage = "get"
        return ("value", pending())
    except Exception as error:
        cause = getattr(error, "cause", None) or error
        first = str(cause).split("\n")[0]
        first = re.sub("0x[0-9a-f]+", "<address>", re.sub("[0-9a-f]{16,}", "<id>", first))
        return (stage, type(cause).__name__, first)


def _run(row: Callable[..., Body], remote: Remote, tmp: Path) -> tuple[Any, ...]:
    if "tmp" in row.__code__.co_varnames[: row.__code__.co_argcount]:
        return outcome(lambda: row(remote, tmp))
    return outcome(lambda: row(remote))


def _local(target: Any) -> Any:
    return debuggable(ray.remote(target))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, ...]]:
    """Every row under plain Ray, once, before local mode runs them without Ray."""
    start_shared_ray()
    results = {}
    for row in ROWS:
        tmp = tmp_path_factory.mktemp(row.__name__)
        results[row.__name__] = _run(row, ray.remote, tmp)
    for name in ("introspected", "listed-counter"):  # names are free for the next runs
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(name))
    return results


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.__name__)
def test_local_mode_matches_ray(
    row: Callable[..., Body], plain: dict[str, tuple[Any, ...]], tmp_path: Path
) -> None:
    """The same outcome as plain Ray, in strict local mode, and no cluster started."""
    if ray.is_initialized():
        ray.shutdown()
    with local_mode(strict=True):
        local = _run(row, _local, tmp_path)
    assert local == plain[row.__name__]
    assert not ray.is_initialized()
