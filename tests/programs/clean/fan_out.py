"""Fan-out: checksum 24 chunks in tasks, at most 6 in flight, each result taken as it lands.

The pattern of Ray's guide for work of uneven length: ``ray.wait`` hands back whichever
call finished first, so a slow chunk holds up nothing, and a bounded window keeps the
driver from submitting more than the cluster can hold.
"""

from __future__ import annotations

import ray

CHUNKS = 24
IN_FLIGHT = 6
CHUNK_ROWS = 300_000


@ray.remote
def checksum(chunk: int) -> tuple[int, int]:
    """One chunk's checksum: some tens of milliseconds of pure Python."""
    total = 0
    for value in range(chunk * CHUNK_ROWS, (chunk + 1) * CHUNK_ROWS):
        total = (total + value * value) % 1_000_003
    return chunk, total


def main() -> None:
    ray.init(num_cpus=2)
    results: dict[int, int] = {}
    pending: list[ray.ObjectRef] = []
    for chunk in range(CHUNKS):
        if len(pending) >= IN_FLIGHT:  # the window is full: take the first one done
            done, pending = ray.wait(pending, num_returns=1)
            finished, value = ray.get(done[0])
            results[finished] = value
        pending.append(checksum.remote(chunk))
    results.update(ray.get(pending))
    assert sorted(results) == list(range(CHUNKS))
    print(f"{len(results)} chunks, combined checksum {sum(results.values()) % 1_000_003}")
    ray.shutdown()


if __name__ == "__main__":
    main()
