"""An async actor: 40 fetches that wait on I/O overlap on one actor; subscribers await news.

Each ``fetch`` awaits its (simulated) network reply with ``asyncio.sleep``, so the actor's
event loop runs the other calls meanwhile: 40 calls of 50 ms take about 50 ms together.
Three subscribers await the next release, which the driver publishes at the end.
"""

from __future__ import annotations

import asyncio

import ray
from _checkpoint import checkpoint

PAGES = 40
REPLY_S = 0.05


@ray.remote
class Gateway:
    """Fetches pages for its callers, and tells subscribers when a release is out."""

    def __init__(self) -> None:
        self.release = 0
        self.released = asyncio.Event()

    async def fetch(self, page: int) -> int:
        """A page's length, once its (simulated) reply has arrived."""
        await asyncio.sleep(REPLY_S)  # the network: the loop runs other calls meanwhile
        return len(f"<html>page {page}</html>")

    async def next_release(self) -> int:
        """Wait until a release is published; its number."""
        await self.released.wait()
        return self.release

    async def publish(self, release: int) -> None:
        self.release = release
        self.released.set()


def main() -> None:
    ray.init(num_cpus=2)
    gateway = Gateway.remote()
    subscribers = [gateway.next_release.remote() for _ in range(3)]
    sizes = ray.get([gateway.fetch.remote(page) for page in range(PAGES)])
    checkpoint()  # the three subscribers' calls are running, awaiting the release
    ray.get(gateway.publish.remote(1))
    print(f"{len(sizes)} pages, {sum(sizes)} bytes; subscribers saw {ray.get(subscribers)}")
    ray.shutdown()


if __name__ == "__main__":
    main()
