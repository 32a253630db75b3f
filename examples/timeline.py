"""A timeline of a run: open it in https://ui.perfetto.dev (or chrome://tracing).

A small pipeline runs in local mode (no cluster): a coordinator task fans work out to an
async actor and to tasks, one of which fails. timeline() turns the calls into a trace: a
slice per call, the failure in red, arrows from each call to those it submitted.

Run: python examples/timeline.py [OUTPUT.json]   (starts no Ray at all)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import ray

import raytrace_kit
from raytrace_kit import debuggable, local_mode


@debuggable
@ray.remote
def resize(size: int) -> int:
    if size > 900:
        msg = f"image too large: {size}"
        raise ValueError(msg)
    return size // 2


@debuggable
@ray.remote
class Cache:
    def __init__(self) -> None:
        self.items: dict[int, int] = {}

    async def put(self, key: int, value: int) -> int:
        await asyncio.sleep(0.01)
        self.items[key] = value
        return len(self.items)


@debuggable
@ray.remote
def coordinate(sizes: list[int]) -> list[str]:
    cache = Cache.remote()
    results = []
    for size in sizes:
        try:
            half = ray.get(resize.remote(size))
        except ValueError:
            results.append("failed")
            continue
        ray.get(cache.put.remote(size, half))
        results.append(str(half))
    return results


def main() -> None:
    with local_mode():
        print(ray.get(coordinate.remote([100, 400, 1000, 640])))
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "run.json"
    path = raytrace_kit.timeline(None, out)
    events = json.loads(path.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    arrows = sum(e["ph"] == "s" for e in events)
    failed = [e["name"] for e in slices if e.get("cname") == "terrible"]
    print(f"{len(slices)} calls, {arrows} arrows, failed: {failed}")
    print(f"open {path} in https://ui.perfetto.dev")


if __name__ == "__main__":
    main()
