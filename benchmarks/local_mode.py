"""Cost of local mode per call, against a direct Python call and a real Ray round trip.

Part 1, Ray not initialized, interleaved rounds in rotating order, until the noise floor
(two identical variants) is within 3%:
  direct             f(x)
  local              ray.get(f.remote(x)) inside local_mode()      (the default: copies)
  local (again)      the same, measured apart: the noise floor
  local copy=False   inside local_mode(copy=False)
  local log=False    the default, with call events off
  local log=False copy=False
Part 2, after ray.init(), interleaved:
  ray round trip     ray.get(f.remote(x)), serial, in a real worker
  local (ray up)     ray.get(f.remote(x)) inside local_mode()

The argument is a list of 16 ints (copied, as Ray copies it); the result an int.

Targets (issue 11): per call with events at most 30 us, without events at most 12 us;
compare with Ray 2.40's own local_mode=True, 362 us per call on this machine.

Run: python benchmarks/local_mode.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

from collections.abc import Callable

import ray
from _harness import (
    arguments,
    cache_bytecode,
    floor,
    interleave,
    interleave_until_stable,
    medians,
    per_call,
)

from raytrace_kit import debuggable, local_mode


def work(batch: list[int]) -> int:
    return len(batch)


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
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

    samples = interleave_until_stable(
        {
            "direct": lambda: per_call(lambda: work(batch), n),
            "local": in_local(lambda: ray.get(task.remote(batch))),
            "local (again)": in_local(lambda: ray.get(task.remote(batch))),
            "local copy=False": in_local(lambda: ray.get(task.remote(batch)), copy=False),
            "local log=False": in_local(lambda: ray.get(quiet.remote(batch))),
            "local log=False copy=False": in_local(
                lambda: ray.get(quiet.remote(batch)), copy=False
            ),
        },
        args.rounds,
        args.max_rounds,
        floors=[("local", "local (again)")],
    )
    noise = floor(samples, "local", "local (again)")
    part1 = medians(samples)
    assert not ray.is_initialized()

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
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
    rounds = len(samples["direct"])
    print(f"\nPer call, median of {rounds} interleaved rounds of {n} calls")
    print(f"  noise floor (local vs local again): {noise:.3f}")
    print(f"  {'variant':<28} {'per call':>10} {'over direct':>12} {'faster than Ray':>16}")
    for label, value in {**part1, **part2}.items():
        over = (value - direct) * 1e6
        print(f"  {label:<28} {value * 1e6:8.1f} us {over:9.1f} us {trip / value:14.0f}x")


if __name__ == "__main__":
    main()
