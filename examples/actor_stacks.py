"""See where a stuck actor is, without stopping it: stacks() on a debuggable actor.

The actor below waits on a lock that is never released: the classic hang. stacks() shows
the line it waits on, which call it is running and for how long, while the actor's own
threads are left alone (methods still run on the main thread, as in plain Ray).

Run: python examples/actor_stacks.py
"""

from __future__ import annotations

import threading
import time

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote
class Inventory:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()  # a bug: taken here, never released

    def reserve(self, item: str) -> str:
        got = self.lock.acquire(timeout=5)  # hangs here (for 5 s in this demo)
        return f"{item}: {'reserved' if got else 'timed out'} on {threading.current_thread().name}"


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        inventory = Inventory.remote()
        pending = inventory.reserve.remote("widget")
        time.sleep(1.5)  # the call is now stuck on the lock
        dump = raytrace_kit.stacks(inventory)
        stuck = dump.find("reserve")
        assert stuck is not None
        (call,) = stuck.calls
        print(f"thread {stuck.name!r} of pid {dump.pid} runs {call.function}")
        print(f"  for {call.running_s:.1f}s, call {call.call_id}, task {call.task_id}")
        _file, lineno, function, line = stuck.frames[-1]
        print(f"  waiting at line {lineno} in {function}: {line}")
        print(ray.get(pending))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
