"""Per-call profiling cost: the kit's capture vs a bare profiler around the same body.

Runs inside one Ray worker, interleaved rounds (A B C D E ...):
  bare memray    with memray.Tracker(new file): body()
  kit memray     the kit's per-call capture (the worker boundary with profile="memray":
                 call events, the capture, its sidecar and peak)
  bare cProfile  cProfile.Profile around body(), dump_stats(new file)
  kit cProfile   the kit's per-call capture with profile="cprofile"
  no profiler    body() alone, for scale
The body builds 20,000 small dicts and sorts them (a few ms).

Targets (issue 6): kit memray <= 1.15x bare memray; kit cProfile <= 1.10x bare cProfile.

Run: python benchmarks/profiling.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import cProfile
import statistics
import tempfile
import time
from pathlib import Path

import ray
from _harness import cache_bytecode


def body() -> int:
    rows = [{"id": i, "name": f"row-{i}", "score": (i * 7919) % 1000} for i in range(20_000)]
    rows.sort(key=lambda r: r["score"])
    return len(rows)


@ray.remote
def measure(rounds: int) -> dict[str, list[float]]:
    import memray  # noqa: PLC0415 -- runs in the worker

    from raytrace_kit._options import CallSpec, DebugOptions  # noqa: PLC0415
    from raytrace_kit._worker.boundary import run  # noqa: PLC0415

    scratch = Path(tempfile.mkdtemp(prefix="rk-bench-"))
    counter = iter(range(10**9))

    def bare_memray() -> None:
        with memray.Tracker(str(scratch / f"bare-{next(counter)}.bin")):
            body()

    def bare_cprofile() -> None:
        profile = cProfile.Profile()
        profile.enable()
        body()
        profile.disable()
        profile.dump_stats(str(scratch / f"bare-{next(counter)}.prof"))

    kit_memray_spec = CallSpec("bench.body", "task", DebugOptions(profile="memray"))
    kit_cprofile_spec = CallSpec("bench.body", "task", DebugOptions(profile="cprofile"))
    variants = {
        "bare memray": bare_memray,
        "kit memray": lambda: run(kit_memray_spec, body, (), {}),
        "bare cProfile": bare_cprofile,
        "kit cProfile": lambda: run(kit_cprofile_spec, body, (), {}),
        "no profiler": body,
    }
    samples: dict[str, list[float]] = {k: [] for k in variants}
    labels = list(variants)
    for fn in variants.values():  # warm up
        fn()
    for r in range(rounds):
        shift = r % len(labels)
        for label in labels[shift:] + labels[:shift]:
            start = time.perf_counter()
            variants[label]()
            samples[label].append(time.perf_counter() - start)
    return samples


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    samples = ray.get(measure.remote(args.rounds))
    ray.shutdown()
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"\nPer call in one worker, median of {args.rounds} interleaved rounds")
    for label, value in med.items():
        print(f"  {label:<14} {value * 1e3:8.2f} ms")
    print(f"\n  kit memray / bare memray     {med['kit memray'] / med['bare memray']:.3f}x")
    print(f"  kit cProfile / bare cProfile {med['kit cProfile'] / med['bare cProfile']:.3f}x")


if __name__ == "__main__":
    main()
