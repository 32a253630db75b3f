"""Pin a function to one process, find it, look at its live stacks, end it.

On a cluster each call of a stateless function may land on a different worker, so a
debugger or profiler cannot stay attached. pin=True runs all calls in one dedicated
process: attach py-spy, debugpy or your IDE to the pid that pinned_worker() reports, and
read the Python stacks of a call that seems stuck, without py-spy or root.

Run: python examples/pinned_debugging.py   (starts its own local Ray)
"""

from __future__ import annotations

import os
import time

import ray

import raytrace_kit
from raytrace_kit import attach_debugger, debuggable


@debuggable(pin=True)
@ray.remote(num_cpus=0.5)
def crunch(batch: list[int], pause: float = 0.0) -> int:
    time.sleep(pause)  # stands in for a call that hangs on I/O or a lock
    return sum(x * x for x in batch)


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        results = ray.get([crunch.remote(list(range(i))) for i in range(10)])
        pids = {e["pid"] for e in raytrace_kit.read_events() if e["event"] == "call.end"}
        print(f"10 calls, results {results[:4]}..., ran in pid(s) {pids}")

        where = crunch.pinned_worker()
        print(f"pinned process: pid {where.pid} on {where.node_ip} (node {where.node_id[:12]})")
        print(f"  attach: py-spy dump --pid {where.pid}   or your IDE's 'attach to process'")

        slow = crunch.remote([1, 2, 3], pause=2.0)
        time.sleep(0.5)
        stuck = crunch.stacks().find("crunch")
        assert stuck is not None
        (call,) = stuck.calls
        print(f"\nthread {stuck.name!r} runs {call.function} for {call.running_s:.1f}s")
        print(f"(call {call.call_id}); its frames, with Ray's and the kit's hidden:")
        for filename, lineno, function, line in stuck.frames[-2:]:
            print(f"  {os.path.basename(filename)}:{lineno} {function}: {line}")
        print(f"slow call result: {ray.get(slow)}")

        # Inside a task, attach_debugger() listens for VS Code (debugpy) or connects to
        # PyCharm; with neither installed it warns and the code goes on.
        endpoint = attach_debugger("pycharm")
        print(f"\nattach_debugger('pycharm') without an IDE: {endpoint} (a warning, no crash)")

        crunch.unpin()
        print(f"after unpin(), a new process: pid {crunch.pinned_worker().pid}")
        crunch.unpin()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
