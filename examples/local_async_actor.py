"""Local mode with an async actor and a streaming generator, as they behave in Ray.

An async actor's calls interleave on its own event loop, so a call may wait for a later
one; a generator streams its items as you iterate. Both run in this process, with no
cluster: `breakpoint()` works in either. Strict mode turns a forgotten plain `@ray.remote`
call (which would start a cluster) into an error that names it.

Run: python examples/local_async_actor.py   (starts no Ray at all)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import ray

from raytrace_kit import LocalModeError, debuggable, local_mode


@debuggable
@ray.remote
class Coordinator:
    """Workers wait until the coordinator releases them: needs concurrent calls."""

    def __init__(self) -> None:
        self.released: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self.released is None:
            self.released = asyncio.Event()
        return self.released

    async def wait_for_release(self, worker: int) -> str:
        await self._event().wait()
        context = ray.get_runtime_context()
        return f"worker {worker} released (task {context.get_task_id()[:16]}...)"

    async def release(self) -> int:
        self._event().set()
        return 1


@debuggable
@ray.remote
def read_batches(count: int) -> Iterator[list[int]]:
    """A streaming generator: each batch is made when the consumer asks for it."""
    for batch in range(count):
        print(f"  making batch {batch}")
        yield list(range(batch * 3, batch * 3 + 3))


@ray.remote
def forgotten(x: int) -> int:
    """Not debuggable: in local mode it would run on a (new) Ray cluster."""
    return x


def main() -> None:
    with local_mode(strict=True):
        coordinator = Coordinator.remote()
        waiting = [coordinator.wait_for_release.remote(i) for i in range(3)]
        ready, pending = ray.wait(waiting, num_returns=3, timeout=0.1)
        print(f"before release: {len(ready)} ready, {len(pending)} waiting")
        ray.get(coordinator.release.remote())
        for line in ray.get(waiting):
            print(line)

        batches = read_batches.remote(3)
        assert isinstance(batches, ray.ObjectRefGenerator)
        for ref in batches:
            print(f"  consumed {ray.get(ref)}")

        try:
            forgotten.remote(1)
        except LocalModeError as error:
            print(f"strict mode: {str(error).split(':')[0]}")
    assert not ray.is_initialized()
    print("no Ray cluster was started")


if __name__ == "__main__":
    main()
