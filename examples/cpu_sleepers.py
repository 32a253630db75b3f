"""CPU profiling: why five calls on one Sleeper actor take as long as five serial calls.

The classic "no speedup" case from Ray's debugging guides: an actor runs one call at a time,
so five calls on one actor are serialized; five actors run them in parallel. A driver-side
cProfile shows where the driver waits; per-call cProfile files show where the workers spend
their time.

Run: python examples/cpu_sleepers.py   (starts its own local Ray)
"""

from __future__ import annotations

import time

import ray

import raytrace_kit
from raytrace_kit import cpu_stats, debuggable, profile_cpu

NAP = 0.2


@debuggable(profile="cprofile")
@ray.remote(num_cpus=0)
class Sleeper:
    def nap(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


def timed(label: str, action: object) -> None:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    print(f"  {label:<44} {time.perf_counter() - start:5.2f} s")


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        one = Sleeper.remote()
        five = [Sleeper.remote() for _ in range(5)]
        ray.get([s.__ray_ready__.remote() for s in [one, *five]])

        print(f"five naps of {NAP} s:")
        with profile_cpu() as driver:
            timed(
                "serial: ray.get inside the loop",
                lambda: [ray.get(one.nap.remote(NAP)) for _ in range(5)],
            )
        timed(
            "one actor, five calls at once",
            lambda: ray.get([one.nap.remote(NAP) for _ in range(5)]),
        )
        timed("five actors, one call each", lambda: ray.get([s.nap.remote(NAP) for s in five]))

        print("\nthe driver, in the serial loop (where it waits):")
        top = driver.summary(top=30).top
        waits = [row for row in top if row["function"] in {"get", "wait", "get_objects"}]
        for row in waits[:2]:
            print(f"  {row['function']:<12} {row['cumulative_s']:.2f} s cumulative")

        naps = [
            e["profile_path"]
            for e in raytrace_kit.read_events()
            if e["event"] == "call.end" and e["function"].endswith("Sleeper.nap")
        ]
        stats = cpu_stats(naps, top=3)
        print(f"\nthe workers: {len(naps)} nap calls merged, {stats.calls('sleep')} sleeps")
        print(stats)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
