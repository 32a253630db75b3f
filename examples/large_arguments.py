"""Large data passed by value: one array copied into every call, and the fix.

A loop passes one 20 MiB array to each of 10 calls of ``score_chunk``: Ray copies it into
the object store at every ``.remote()``, 10 copies where one would do. ``lookup`` reads a
20 MiB global: Ray pickles the array into the function, and each worker that runs it
fetches its own copy. The report names both, with their sizes and the line; the same
work done as the findings say (``ray.put`` once, pass the ref) has neither finding.

Run: python examples/large_arguments.py   (starts its own local Ray)
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy
import ray

import raytrace_kit

raytrace_kit.instrument()  # every remote function of this file, as `raytrace-kit run` does

TABLE = numpy.ones(20 * 2**20 // 8)  # 20 MiB


@ray.remote
def score_chunk(data: numpy.ndarray, i: int) -> float:
    return float(data[i])


@ray.remote
def lookup(i: int) -> float:
    return float(TABLE[i])  # the global travels inside the function


@ray.remote
def lookup_in(table: numpy.ndarray, i: int) -> float:
    return float(table[i])


def ours(made: raytrace_kit.Report) -> list[raytrace_kit.Finding]:
    return [f for f in made.findings if f.kind in {"passed_by_value", "large_function"}]


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    data = numpy.ones(20 * 2**20 // 8)
    ray.get([score_chunk.remote(data, i) for i in range(10)])  # 10 copies of data
    ray.get([lookup.remote(i) for i in range(4)])

    fixed_from = datetime.now(timezone.utc).isoformat()
    ref = ray.put(data)  # one copy, shared by every call
    ray.get([score_chunk.remote(ref, i) for i in range(10)])
    table = ray.put(TABLE)
    ray.get([lookup_in.remote(table, i) for i in range(4)])
    time.sleep(1)  # submission records are written in batches, within 0.2 s

    found = ours(raytrace_kit.report())
    for finding in found:
        print(f"- {finding.title}\n  {finding.evidence}\n  Fix: {finding.fix}\n")
    assert {f.kind for f in found} == {"passed_by_value", "large_function"}, found
    assert ours(raytrace_kit.report(since=fixed_from)) == []
    print("fixed: no finding")
    ray.shutdown()


if __name__ == "__main__":
    main()
