"""Memory profiling: find what a leaking actor keeps, with memray for the actor's whole life.

Ray's memory docs recommend profiling a whole actor's life to hunt leaks. Here the actor
keeps every batch it sees. Per-call events show its memory (RSS - SHR, the per-process
figure Ray's docs recommend) growing call after call; a capture from __init__ to exit shows
which line allocated what it kept; memray's flame graph shows it as a picture.

Run: python examples/memory_leak_actor.py   (starts its own local Ray)
"""

from __future__ import annotations

import time

import memray
import ray

import raytrace_kit
from raytrace_kit import debuggable, flamegraph, profile_summary

MIB = 1024 * 1024


@debuggable(profile="memray", profile_scope="actor")
@ray.remote
class BatchCache:
    def __init__(self) -> None:
        self.seen: list[bytearray] = []

    def process(self, mib: int) -> int:
        batch = bytearray(mib * MIB)
        self.seen.append(batch)  # the leak: every batch is kept
        return len(self.seen)


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        cache = BatchCache.remote()
        for _ in range(5):
            ray.get(cache.process.remote(20))

        ends = [
            e
            for e in raytrace_kit.read_events()
            if e["event"] == "call.end" and e["function"].startswith("__main__.BatchCache")
        ]
        print("memory of the actor's process after each call (RSS - SHR):")
        for end in ends:
            name = end["function"].rsplit(".", 1)[1]
            print(f"  {name:<10} {end['rss_minus_shr_bytes'] / MIB:8.1f} MiB")

        capture = ends[0]["profile_path"]  # started by __init__, runs until the actor exits
        cache.__ray_terminate__.remote()  # a clean exit completes the capture
        deadline = time.monotonic() + 30
        while True:
            try:
                memray.FileReader(capture).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

        print(f"\n{profile_summary(capture, top=3)}")
        html = flamegraph(capture)
        print(f"\nflame graph: {html}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
