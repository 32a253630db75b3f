"""A stateful actor with a bounded cache: 48 requests look tiles up; at most 12 are kept.

Each tile the cache does not hold is rendered (4 MiB) and kept, the least recently used
dropped once it holds ``CAPACITY``: its memory grows while it fills, then stays. Each
request is a task that asks the cache, then does its own work with the answer; the cache
is up before they come (an actor needs a CPU to be placed, and they take every CPU).
"""

from __future__ import annotations

import collections

import ray

CAPACITY = 12
TILE_BYTES = 4 * 2**20
REQUESTS = 48


@ray.remote
class TileCache:
    """Rendered tiles by number, the least recently used dropped past ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.tiles: collections.OrderedDict[int, bytearray] = collections.OrderedDict()
        self.hits = self.misses = 0

    def lookup(self, number: int) -> int:
        """A tile's checksum, rendering (and keeping) it if it is not held."""
        tile = self.tiles.get(number)
        if tile is None:
            self.misses += 1
            tile = self.tiles[number] = render(number)
            if len(self.tiles) > self.capacity:
                self.tiles.popitem(last=False)
        else:
            self.hits += 1
            self.tiles.move_to_end(number)
        return sum(tile[:: 2**16])

    def counts(self) -> tuple[int, int]:
        return self.hits, self.misses


def render(number: int) -> bytearray:
    """A tile's pixels: every page written, as a real image would be."""
    tile = bytearray(TILE_BYTES)
    tile[::4096] = bytes([number % 251]) * len(tile[::4096])
    return tile


@ray.remote
def respond(request: int, cache: ray.actor.ActorHandle) -> int:
    """One request: its tile's checksum from the cache, then the request's own work."""
    total = ray.get(cache.lookup.remote(tile_for(request)))
    for value in range(300_000):
        total = (total + value * request) % 1_000_003
    return total


def tile_for(request: int) -> int:
    """The tile a request asks for: each of the first CAPACITY once, then a few hot ones."""
    return request if request < CAPACITY else (request * request) % 17


def main() -> None:
    ray.init(num_cpus=2)
    cache = TileCache.remote(CAPACITY)
    ray.get(cache.counts.remote())  # up before the requests come: they take every CPU
    answers = ray.get([respond.remote(request, cache) for request in range(REQUESTS)])
    hits, misses = ray.get(cache.counts.remote())
    print(f"{len(answers)} requests: {hits} hits, {misses} misses, at most {CAPACITY} tiles kept")
    ray.shutdown()


if __name__ == "__main__":
    main()
