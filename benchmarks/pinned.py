"""Pinned calls vs plain tasks vs a hand-written actor doing the same, interleaved.

Variants, each 2000 trivial calls submitted together then one ray.get, in rotating order:
  plain task          @ray.remote function
  hand-written actor  @ray.remote class with one method calling the function
  pinned log=False    @debuggable(pin=True, log=False): the pinning mechanism alone
  pinned log=True     @debuggable(pin=True): with call events, as used by default

Target (issue 5): pinned at most 1.10x the hand-written actor.

Run: python benchmarks/pinned.py [--calls 2000] [--rounds 9]
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import ray
from _harness import arguments, interleave

from raytrace_kit import debuggable


def double(x: int) -> int:
    return 2 * x


class Handwritten:
    def call(self, x: int) -> int:
        return double(x)


def main() -> None:
    args = arguments(__doc__, calls=2000, rounds=9)
    n = args.calls
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # Ray's defaults: a task and an actor each reserve one CPU; the pinned runner reserves
    # what the function's task would.
    plain = ray.remote(double)
    actor = ray.remote(num_cpus=1)(Handwritten).remote()
    quiet = debuggable(pin=True, log=False)(ray.remote(num_cpus=0)(double))
    loud = debuggable(pin=True)(ray.remote(num_cpus=0)(double))

    def run(submit: Any) -> float:
        start = time.perf_counter()
        ray.get([submit(i) for i in range(n)])
        return time.perf_counter() - start

    variants = {
        "plain task": lambda: run(plain.remote),
        "hand-written actor": lambda: run(actor.call.remote),
        "pinned log=False": lambda: run(quiet.remote),
        "pinned log=True": lambda: run(loud.remote),
    }
    for fn in variants.values():  # warm up: workers, actors, exports
        fn()
    samples = interleave(variants, args.rounds)
    ray.shutdown()
    base = statistics.median(samples["hand-written actor"])
    print(f"\n{n} calls, median of {args.rounds} interleaved rounds")
    for label, values in samples.items():
        med = statistics.median(values)
        print(
            f"  {label:<19} {med * 1e3:8.1f} ms  {med / n * 1e6:6.1f} us/call  "
            f"{med / base:5.3f}x hand-written actor"
        )


if __name__ == "__main__":
    main()
