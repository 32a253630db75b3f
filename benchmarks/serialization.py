"""Cost of serializability checks per call.

Measured on calls in local mode with events and copies off (about 5 us per call), so
that sub-microsecond differences are visible (a Ray submission costs ~0.5 ms and hides
them). Interleaved rounds, A B C ...:
  off          @debuggable(check="off")
  first        @debuggable(check="first") (the default), after its first call
  always/small check="always", one small argument (a dict of 10 ints)
  always/bytes check="always", 8 MB of bytes (a type known to pickle: not serialized)
  always/list  check="always", a list of 1M ints (serialized once more to check it)

Targets (issue 4): "first" within noise of "off" and under 1 us per call.

Run: python benchmarks/serialization.py [--calls 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import ray

from raytrace_kit import debuggable, local_mode


def work(arg: object) -> int:
    return 1


def per_call(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    n = args.calls
    small = {str(i): i for i in range(10)}
    blob = bytes(8_000_000)
    numbers = list(range(1_000_000))
    base = ray.remote(work)
    off = debuggable(check="off", log=False)(base)
    first = debuggable(check="first", log=False)(base)
    always = debuggable(check="always", log=False)(base)

    variants: dict[str, Callable[[], float]] = {
        "off": lambda: per_call(lambda: off.remote(small), n),
        "first": lambda: per_call(lambda: first.remote(small), n),
        "off (2)": lambda: per_call(lambda: off.remote(small), n),
        "always/small": lambda: per_call(lambda: always.remote(small), n),
        "always/bytes": lambda: per_call(lambda: always.remote(blob), n),
        "always/list": lambda: per_call(lambda: always.remote(numbers), max(n // 1000, 10)),
    }
    samples: dict[str, list[float]] = {k: [] for k in variants}
    labels = list(variants)
    with local_mode(copy=False):
        first.remote(small)  # the one check "first" does
        for r in range(args.rounds):
            shift = r % len(labels)
            for label in labels[shift:] + labels[:shift]:
                samples[label].append(variants[label]())
    assert not ray.is_initialized()

    base_cost = statistics.median(samples["off"])
    print(f"\nPer call, local mode, median of {args.rounds} interleaved rounds")
    for label, values in samples.items():
        med = statistics.median(values)
        print(f"  {label:<13} {med * 1e6:10.2f} us  ({(med - base_cost) * 1e6:+9.2f} us vs off)")


if __name__ == "__main__":
    main()
