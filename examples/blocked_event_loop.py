"""An async actor whose method blocks its event loop, named by the report and by stuck().

``Fetcher.fetch`` is ``async def`` but calls ``time.sleep``: while it sleeps, the actor's
event loop runs nothing else, so four fetches that should overlap take four times as long
and ``ping`` waits behind them. Nothing fails; it is just slow, and Ray does not say why.

The kit's thread in the actor's process notices the loop held (a heartbeat it hands the
loop every 50 ms waits 100 ms or more), and names the call and the line. The report
makes it a finding with the fix; ``raytrace_kit.stuck()`` taken while a call holds the
loop shows it, with the line it is at.

Run: python examples/blocked_event_loop.py
"""

from __future__ import annotations

import asyncio
import time

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote
class Fetcher:
    async def fetch(self, i: int) -> int:
        time.sleep(0.3)  # blocks the event loop: await asyncio.sleep(0.3) would not
        return i

    async def fetch_well(self, i: int) -> int:
        await asyncio.sleep(0.3)  # the loop runs other calls meanwhile
        return i

    async def ping(self) -> str:
        return "pong"


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    fetcher = Fetcher.remote()
    ray.get(fetcher.ping.remote())

    started = time.perf_counter()
    ray.get([fetcher.fetch_well.remote(i) for i in range(4)])
    print(f"4 fetches awaiting asyncio.sleep: {time.perf_counter() - started:.2f} s")

    started = time.perf_counter()
    refs = [fetcher.fetch.remote(i) for i in range(4)]
    for _ in range(40):  # while a fetch holds the loop (each holds it 0.3 s)
        stuck = raytrace_kit.stuck()
        if stuck.held_loops:
            break
    ray.get([*refs, fetcher.ping.remote()])
    print(f"4 fetches calling time.sleep:     {time.perf_counter() - started:.2f} s\n")
    for held in stuck.held_loops:
        print(f"stuck(): {held['function']} held its loop {held['held_s']:.1f} s so far")

    report = raytrace_kit.report(raytrace_kit.log_dir())
    for finding in report.findings:
        if finding.kind == "blocked_loop":
            print(f"\n{finding.title}\n  Fix: {finding.fix}")
    ray.shutdown()


if __name__ == "__main__":
    main()
