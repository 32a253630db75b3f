"""Actors in local mode: built in this process, one call at a time, named, killed.

Run without Ray, as users run local mode. Async actors are in test_async.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import ray
from ray.exceptions import ActorDiedError

import raytrace_kit
from raytrace_kit import LocalActorHandle, debuggable, local_mode
from tests.helpers import events_of


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


@debuggable
@ray.remote
class Recorder:
    def __init__(self) -> None:
        self.order: list[str] = []

    def items(self, n: int) -> Iterator[int]:
        for i in range(n):
            self.order.append(f"item {i}")
            yield i

    def mark(self) -> list[str]:
        self.order.append("mark")
        return self.order


@pytest.mark.usefixtures("no_ray")
class TestActors:
    """An actor lives here: its calls run in order, as in Ray, and it ends as in Ray."""

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

    def test_sync_actor_finishes_a_generator_before_its_next_call(self) -> None:
        """As in Ray, a sync actor runs one call at a time: the generator ends first."""
        with local_mode(strict=True):
            recorder = Recorder.remote()
            refs = recorder.items.remote(3)
            assert ray.get(next(refs)) == 0
            order = ray.get(recorder.mark.remote())
            assert order == ["item 0", "item 1", "item 2", "mark"]
            assert [ray.get(ref) for ref in refs] == [1, 2]  # the rest, already made
