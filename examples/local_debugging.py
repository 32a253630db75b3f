"""Debug remote code in local mode: pdb, breakpoints and post-mortem, with no cluster.

Ray removed `ray.init(local_mode=True)`. raytrace_kit's local mode runs debuggable tasks and
actors in this process, in order, so `breakpoint()` stops in your remote code.

Run: python examples/local_debugging.py            (non-interactive: no breakpoint)
     DEBUG=1 python examples/local_debugging.py    (stops at the breakpoint; 'c' continues)
"""

from __future__ import annotations

import os
import statistics

import ray

import raytrace_kit
from raytrace_kit import debuggable, local_mode

INTERACTIVE = os.environ.get("DEBUG") == "1"


@debuggable
@ray.remote(num_cpus=1)
def calculate_statistics(values: list[float]) -> dict[str, float]:
    """The classic task from Ray's debugging guides, with a bug for empty input."""
    if INTERACTIVE:
        breakpoint()  # in local mode this stops right here, in this process
    return {"mean": statistics.mean(values), "max": max(values)}


@debuggable
@ray.remote
class DataProcessor:
    """An actor that keeps state between calls."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.processed = 0

    def process(self, batch: list[float]) -> list[float]:
        self.processed += len(batch)
        return [x * self.scale for x in batch]

    def count(self) -> int:
        return self.processed


def main() -> None:
    with local_mode():
        stats = ray.get(calculate_statistics.remote([3.0, 1.0, 2.0]))
        print(f"statistics: {stats}")

        processor = DataProcessor.remote(scale=10)
        batches = ray.get([processor.process.remote([1.0, 2.0]), processor.process.remote([3.0])])
        print(f"processed: {batches}, count={ray.get(processor.count.remote())}")

        # The bug: an empty batch. The error surfaces at ray.get, as on a cluster, as a
        # RayTaskError that is also the original StatisticsError, with your frames in it.
        ref = calculate_statistics.remote([])
        try:
            ray.get(ref)
        except statistics.StatisticsError as exc:
            print(f"caught at ray.get: {type(exc).__name__}, also a StatisticsError")
            # Interactively, `import pdb; pdb.post_mortem(exc.__traceback__)` opens the
            # failing frame; or use local_mode(post_mortem=True) to stop as it fails.

    print(f"\nRay was never started: ray.is_initialized() = {ray.is_initialized()}")
    local_calls = [e for e in raytrace_kit.read_events() if e.get("mode") == "local"]
    print(f"{len(local_calls)} local events in {raytrace_kit.log_dir()}, e.g.:")
    for event in local_calls[-2:]:
        print(f"  {event['event']:<10} {event['function']} status={event.get('status', '-')}")
    assert not ray.is_initialized()


if __name__ == "__main__":
    main()
