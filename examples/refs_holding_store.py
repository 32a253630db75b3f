"""Object refs that hold the store: results kept as refs in a list, and the fix.

A loop keeps the ref of each 10 MiB result in a list while more are made: 16 results in a
store of 100 MiB, so Ray spills. ``raytrace_kit.memory()`` (``raytrace-kit memory`` from
a shell) names the line whose refs hold them, with their bytes; the report makes the
finding from the driver's own record. Taking each result as it ends holds a few at most.

Run: python examples/refs_holding_store.py   (starts its own local Ray, 100 MiB store)
"""

from __future__ import annotations

import numpy
import ray

import raytrace_kit
from raytrace_kit._driver import store_watch
from raytrace_kit._driver.memory import memory

raytrace_kit.instrument()  # every remote function of this file, as `raytrace-kit run` does

SIZE = 10 * 2**20


@ray.remote
def produce(i: int) -> numpy.ndarray:
    return numpy.full(SIZE, i % 251, dtype=numpy.uint8)


def held_in_a_list() -> int:
    refs = [produce.remote(i) for i in range(16)]  # every ref kept: the store fills
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    print(memory())  # what the refs hold now, by line
    store_watch.look()  # the driver's record, as its thread writes it each second
    return sum(int(ray.get(ref)[0]) for ref in refs)


def taken_as_they_end() -> int:
    pending, total = [], 0
    for i in range(16):
        pending.append(produce.remote(i))
        if len(pending) >= 4:
            ready, pending = ray.wait(pending, num_returns=1)
            total += int(ray.get(ready[0])[0])
    return total + sum(int(ray.get(ref)[0]) for ref in pending)


if __name__ == "__main__":
    ray.init(address="local", num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False)
    assert held_in_a_list() == taken_as_they_end()
    session = raytrace_kit.open_session()
    found = [f for f in raytrace_kit.report(session).findings if f.kind == "refs_hold_store"]
    for finding in found:
        print(f"- {finding.title}\n  Fix: {finding.fix}")
    ray.shutdown()
