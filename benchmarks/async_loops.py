"""Cost of watching async actors' event loops: async actor calls, plain vs @debuggable.

Compares, interleaved in one run (rotating order):
  plain       an async actor under @ray.remote (twice: the second copy is the noise floor)
  kit         the same class under @debuggable (events, the loop's heartbeat while calls run)
  kit, no loop watch   the same, its loop not watched (what the watch itself costs)
on N trivial async method calls submitted together, then one ray.get; and, with the loop
idle between rounds, the CPU the actor's process spends (its heartbeats stop when no call
runs: an idle actor costs nothing).

Run it in two trees (before and after a change) to see what the change costs:
python benchmarks/async_loops.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import os
import time

import ray
from _harness import actor_calls, arguments, cache_bytecode, interleave_until_stable, print_ratios

from raytrace_kit import debuggable


class AsyncEcho:
    async def echo(self, x: int) -> int:
        return x

    def cpu(self) -> float:
        return time.process_time()

    def pid(self) -> int:
        return os.getpid()

    def unwatch(self) -> bool:
        """In this actor's process only: no loop is watched (the kit's part measured apart)."""
        try:
            from raytrace_kit._worker import loops  # noqa: PLC0415 -- the kit's own, on purpose
        except ImportError:  # a tree without the loop watch: nothing to turn off
            return False
        loops.started = lambda call: None
        return True


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    options = arguments(__doc__ or "", calls=2000, rounds=7)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    plain = [ray.remote(AsyncEcho).remote() for _ in range(2)]
    kit, unwatched = (debuggable(ray.remote(AsyncEcho)).remote() for _ in range(2))
    print("loops unwatched in the second kit actor:", ray.get(unwatched.unwatch.remote()))
    for handle in [*plain, kit, unwatched]:
        actor_calls(handle, 200)  # warm: workers started, code shipped
    variants = {
        "plain": lambda: actor_calls(plain[0], options.calls),
        "plain (twin)": lambda: actor_calls(plain[1], options.calls),
        "kit": lambda: actor_calls(kit, options.calls),
        "kit, no loop watch": lambda: actor_calls(unwatched, options.calls),
    }
    samples = interleave_until_stable(
        variants, options.rounds, options.max_rounds, [("plain", "plain (twin)")]
    )
    print_ratios("async actor calls", samples, options.calls, "plain", "plain (twin)")
    # Idle: no call runs, so no heartbeat is sent; the process's CPU over 5 s says so.
    before = ray.get(kit.cpu.remote())
    time.sleep(5)
    idle = ray.get(kit.cpu.remote()) - before
    print(f"idle kit actor: {idle * 1000:.1f} ms of CPU in 5 s ({idle / 5:.3%} of a core)")
    ray.shutdown()


if __name__ == "__main__":
    main()
