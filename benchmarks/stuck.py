"""How long `stuck()` takes with many calls in flight (the issue's target: 10,000 in 5 s).

Two debuggable tasks hold the 2 CPUs of a local instance (a busy wait on a file) and
N more are submitted behind them: N + 2 calls in flight, all recorded. Then `stuck()`
runs --rounds times (median, and each time), as `raytrace-kit stuck` would from the
driver: a task on the node reads its event files and asks its processes for snapshots.
The answer is checked: every call in flight is there, the queued ones named waiting for
CPU held by the two.

Run: python benchmarks/stuck.py [--calls 10000] [--rounds 5]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import ray
from _harness import arguments, cache_bytecode

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote
def hold(release: str) -> int:
    while not os.path.exists(release):
        time.sleep(0.02)
    return 1


@debuggable
@ray.remote
def queued(x: int) -> int:
    return x


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=10_000, rounds=5)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    release = Path(tempfile.mkdtemp()) / "release"
    holders = [hold.remote(str(release)) for _ in range(2)]
    while len(raytrace_kit.stuck().running) < 2:
        time.sleep(0.1)
    started = time.perf_counter()
    refs = [queued.remote(i) for i in range(args.calls)]
    submitted = time.perf_counter() - started
    times = []
    for _ in range(args.rounds):
        began = time.perf_counter()
        found = raytrace_kit.stuck()
        times.append(time.perf_counter() - began)
        assert len(found.flights) == args.calls + 2, len(found.flights)
        assert {f.reason for f in found.pending} == {"resources"}
    text = time.perf_counter()
    shown = str(found)
    text = time.perf_counter() - text
    release.touch()
    ray.get(refs + holders)
    ray.shutdown()
    print(f"{args.calls} calls submitted in {submitted:.2f} s; {args.calls + 2} in flight")
    print(f"stuck(): median {statistics.median(times):.2f} s over {args.rounds} rounds "
          f"({', '.join(f'{t:.2f}' for t in times)}); rendering the text {text:.2f} s")  # fmt: skip
    print(shown.splitlines()[0])


if __name__ == "__main__":
    main()
