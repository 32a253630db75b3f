"""Watch a run live: top's view of a job as it goes, then the report computed where the files are.

A job resizes 120 images on a local Ray; image 42 takes far longer than the rest (a
straggler) and every 25th fails. Halfway through, ``raytrace_kit.top(once=True)`` takes
one snapshot of the live view (what ``raytrace-kit top`` redraws every second): each
function's calls running, pending, done and failed, the straggler named while it runs,
the latest failures. After the job, ``raytrace_kit.report(address=...)`` has the
cluster's nodes tally their own files and merges the tallies: the same report as
``collect()`` then ``report()``, without copying the files.

In a terminal, ``raytrace-kit top`` shows the same view, redrawn until ``q``; in a
notebook, ``raytrace_kit.top()`` redraws it in the cell's output.

Run: python examples/watch_live.py
"""

from __future__ import annotations

import time

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote(num_cpus=1)
def resize(image_id: int) -> int:
    time.sleep(4.0 if image_id == 42 else 0.02)  # image 42: a straggler
    if image_id % 25 == 7:
        message = f"image {image_id}: not a JPEG"
        raise ValueError(message)
    return image_id


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    refs = [resize.remote(i) for i in range(120)]
    time.sleep(3.0)  # the job is going: image 42 has run for about 2.5 s

    print(raytrace_kit.top(once=True))  # one snapshot; top() alone keeps redrawing it

    failed = 0
    for ref in refs:
        try:
            ray.get(ref)
        except ValueError:
            failed += 1
    print(f"job done: {len(refs) - failed} resized, {failed} failed\n")

    on_nodes = raytrace_kit.report(address="auto")  # tallied on the nodes, merged here
    print(on_nodes)
    collected = raytrace_kit.report(raytrace_kit.collect())  # every file copied here first
    same = [on_nodes.to_dict(), collected.to_dict()]
    for data in same:
        data["overview"].pop("source")
    assert same[0] == same[1], "the two reports differ"
    print("report(address=...) is the report of collect() + report(): the same answers")
    ray.shutdown()


if __name__ == "__main__":
    main()
