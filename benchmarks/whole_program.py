"""Overhead of `raytrace-kit run`: the driver's record, and instrumenting plain remotes.

Compares, interleaved in one Ray session (rotating order):
  decorated           @debuggable over @ray.remote, ray.get as Ray's (twice: the noise floor)
  + driver record     the same, with the driver's record on (ray.get/ray.wait hooked)
  run                 a plain @ray.remote under instrument(): sent through a proxy at
                      submission, the driver's record on (what `raytrace-kit run` does)
on three shapes: a ray.get per call in a loop (a wait counted per call), one ray.get of
all the calls, and ray.get of refs that are ready already (no task: the hook's own cost
against Ray's cheapest get).

Target (issue 29): the driver's record within 1.05x of the decorated program.

Run: python benchmarks/whole_program.py [--calls 1000] [--rounds 7] [--max-rounds 42]
"""

from __future__ import annotations

import time
from collections.abc import Callable

import ray
from _harness import arguments, cache_bytecode, interleave_until_stable, print_ratios

import raytrace_kit
from raytrace_kit import debuggable
from raytrace_kit._driver import program, record
from raytrace_kit.testing import reset


def trivial(x: int) -> int:
    return x


def in_a_loop(fn, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        ray.get(fn.remote(i))
    return time.perf_counter() - start


def all_at_once(fn, n: int) -> float:
    start = time.perf_counter()
    ray.get([fn.remote(i) for i in range(n)])
    return time.perf_counter() - start


def ready(refs, n: int) -> float:
    start = time.perf_counter()
    for ref in refs[:n]:
        ray.get(ref)
    return time.perf_counter() - start


def variant(setup: Callable[[], None], shape, fn, n: int) -> Callable[[], float]:
    def measured() -> float:
        reset()  # no hook of the kit's in place...
        setup()  # ...but this variant's (outside the timing)
        return shape(fn, n)

    return measured


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=1000, rounds=7)
    n = args.calls
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    plain = ray.remote(trivial)
    decorated = debuggable(plain)
    built: dict[str, object] = {}

    def instrumented() -> None:
        # A program builds its proxy once; reset() between rounds would build it, and
        # export its function to the cluster, again every round: keep the first.
        raytrace_kit.instrument()
        built.setdefault("proxy", program._proxy_for(plain))
        program.state.proxies[plain] = built["proxy"]

    setups = {
        "decorated": (lambda: None, decorated),
        "decorated (2)": (lambda: None, decorated),
        "+ driver record": (record.start, decorated),
        "run": (instrumented, plain),
    }
    for setup, fn in setups.values():  # warm up: workers, exports
        variant(setup, all_at_once, fn, 200)()
    shapes = {"loop": in_a_loop, "batch": all_at_once, "ready": ready}
    puts = [ray.put(i) for i in range(n)]
    samples = interleave_until_stable(
        {
            f"{shape} {label}": variant(setup, shapes[shape], puts if shape == "ready" else fn, n)
            for shape in shapes
            for label, (setup, fn) in setups.items()
        },
        args.rounds,
        args.max_rounds,
        [(f"{shape} decorated", f"{shape} decorated (2)") for shape in shapes],
    )
    reset()
    ray.shutdown()
    for shape, title in (
        ("loop", "ray.get per call, in a loop"),
        ("batch", "one ray.get of all calls"),
        ("ready", "ray.get of a ready ref, in a loop"),
    ):
        by_label = {k: samples[f"{shape} {k}"] for k in setups}
        print_ratios(title, by_label, n, "decorated", "decorated (2)")


if __name__ == "__main__":
    main()
