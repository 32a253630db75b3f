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

import statistics
from collections.abc import Callable

import ray
from _harness import arguments, interleave, per_call

from raytrace_kit import debuggable, local_mode


def work(arg: object) -> int:
    return 1


def main() -> None:
    args = arguments(__doc__, calls=20000, rounds=7)
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
    with local_mode(copy=False):
        first.remote(small)  # the one check "first" does
        samples = interleave(variants, args.rounds)
    assert not ray.is_initialized()

    base_cost = statistics.median(samples["off"])
    print(f"\nPer call, local mode, median of {args.rounds} interleaved rounds")
    for label, values in samples.items():
        med = statistics.median(values)
        print(f"  {label:<13} {med * 1e6:10.2f} us  ({(med - base_cost) * 1e6:+9.2f} us vs off)")


if __name__ == "__main__":
    main()
