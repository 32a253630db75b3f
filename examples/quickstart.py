"""raytrace_kit quickstart: decorate a task and an actor, run them, read their events.

Run: python examples/quickstart.py   (starts its own local Ray, then shuts it down)
"""

from __future__ import annotations

import ray

import raytrace_kit
from raytrace_kit import debuggable, get_logger


@debuggable
@ray.remote(num_cpus=1)
def transform(batch: list[int]) -> list[int]:
    """Double every value, logging how many rows went through."""
    get_logger(stage="transform").info("batch.done", rows=len(batch))
    return [x * 2 for x in batch]


@debuggable
@ray.remote
class Accumulator:
    """Keeps a running total."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, values: list[int]) -> int:
        self.total += sum(values)
        return self.total


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    try:
        batches = [list(range(i, i + 5)) for i in range(0, 20, 5)]
        doubled = ray.get([transform.remote(b) for b in batches])
        acc = Accumulator.remote()
        for batch in doubled:
            total = ray.get(acc.add.remote(batch))
        print(f"total = {total}")

        try:
            ray.get(transform.remote(None))  # len(None): fails in the worker
        except TypeError as exc:
            print(f"the failure arrived as Ray delivers it: {type(exc).__name__}")

        print(f"\nevents are in {raytrace_kit.log_dir()}")
        for event in raytrace_kit.read_events():
            if event["event"] == "call.submit":  # written by the process that called .remote()
                extra = f"from {event['site']}"
            elif event["event"] == "call.end":
                extra = f"attempt={event['attempt']} status={event['status']}"
                extra += f" duration={event['duration_s']:.4f}s"
            else:
                extra = f"attempt={event['attempt']}"
            print(f"  {event['event']:<11} {event['function']:<32} pid={event['pid']} {extra}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
