"""Cost of local mode per call, against a direct Python call and a real Ray round trip.

Part 1, Ray not initialized, interleaved rounds (A B C D A B C D ...):
  direct          f(x)
  local copy=False ray.get(f.remote(x)) inside local_mode(copy=False)
  local copy=True  ray.get(f.remote(x)) inside local_mode()          (the default)
  local log=False  as copy=False, with call events off
Part 2, after ray.init(), interleaved:
  ray round trip   ray.get(f.remote(x)), serial, in a real worker
  local (ray up)   ray.get(f.remote(x)) inside local_mode(): results are real ObjectRefs

Targets (issue 3): at most 20 us per call over a direct call with copy=False; at least
100x faster than a serial Ray round trip.

Run: python benchmarks/local_mode.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

from collections.abc import Callable

import ray
from _harness import arguments, interleave, medians, per_call

from raytrace_kit import debuggable, local_mode


def work(batch: list[int]) -> int:
    return len(batch)


def main() -> None:
    args = arguments(__doc__, calls=2000, rounds=7)
    n = args.calls
    batch = list(range(16))
    task = debuggable(ray.remote(work))
    quiet = task.with_debug(log=False)

    def in_local(fn: Callable[[], object], **kw: bool) -> Callable[[], float]:
        def run() -> float:
            with local_mode(**kw):
                return per_call(fn, n)

        return run

    part1 = medians(
        interleave(
            {
                "direct": lambda: per_call(lambda: work(batch), n),
                "local copy=False": in_local(lambda: ray.get(task.remote(batch)), copy=False),
                "local copy=True": in_local(lambda: ray.get(task.remote(batch))),
                "local log=False": in_local(lambda: ray.get(quiet.remote(batch)), copy=False),
            },
            args.rounds,
        )
    )
    assert not ray.is_initialized()

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.get(task.remote(batch))  # warm: worker started, function exported
    part2 = medians(
        interleave(
            {
                "ray round trip": lambda: per_call(lambda: ray.get(task.remote(batch)), n // 10),
                "local (ray up)": in_local(lambda: ray.get(task.remote(batch))),
            },
            args.rounds,
        )
    )
    ray.shutdown()

    direct = part1["direct"]
    trip = part2["ray round trip"]
    print(f"\nPer call, median of {args.rounds} interleaved rounds of {n} calls")
    print(f"  {'variant':<18} {'per call':>10} {'over direct':>12} {'faster than Ray':>16}")
    for label, value in {**part1, **part2}.items():
        over = (value - direct) * 1e6
        print(f"  {label:<18} {value * 1e6:8.1f} us {over:9.1f} us {trip / value:14.0f}x")


if __name__ == "__main__":
    main()
