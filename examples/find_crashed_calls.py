"""Find the calls a crashed worker was running, from raytrace_kit's events.

A worker killed by SIGKILL (the OOM killer, `kill -9`) cannot report anything, and Ray only
says that the worker died. raytrace_kit writes `call.start` before the call runs, so the
calls that have a `call.start` and no `call.end` are the ones the crash interrupted, with
their function, attempt, process and node.

Run: python examples/find_crashed_calls.py   (starts its own local Ray)
"""

from __future__ import annotations

import os
import signal
import time

import ray

import raytrace_kit
from raytrace_kit import debuggable, get_logger


@debuggable
@ray.remote(max_retries=0)
def process(item: int) -> int:
    log = get_logger()
    log.info("item.begin", item=item)
    if item == 3:
        # Stand-in for a native crash or the OOM killer: the process dies at once.
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    return item * 10


def interrupted_calls(events: list[dict]) -> list[dict]:
    """The call.start events whose call never ended."""
    ended = {e["call_id"] for e in events if e["event"] == "call.end"}
    return [e for e in events if e["event"] == "call.start" and e["call_id"] not in ended]


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        refs = [process.remote(i) for i in range(6)]
        for i, ref in enumerate(refs):
            try:
                print(f"item {i}: {ray.get(ref)}")
            except ray.exceptions.WorkerCrashedError:
                print(f"item {i}: the worker crashed (Ray cannot say what it was doing)")

        events = raytrace_kit.read_events()
        print("\ncalls interrupted by a crash:")
        for start in interrupted_calls(events):
            story = [e for e in events if e.get("call_id") == start["call_id"]]
            print(
                f"  {start['function']} task={start['task_id'][:16]}... "
                f"pid={start['pid']} node={start['node_id'][:12]} attempt={start['attempt']}"
            )
            for event in story:
                fields = {k: event[k] for k in ("item",) if k in event}
                print(f"    {event['timestamp']}  {event['event']} {fields}")
        assert len(interrupted_calls(events)) == 1
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
