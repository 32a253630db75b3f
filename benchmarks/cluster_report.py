"""A cluster's report computed on its nodes against collect() then report(): bytes and time.

A 3-node ``ray.cluster_utils.Cluster`` (nodes 1 and 2 with directories of their own, as
separate machines) runs --calls debuggable actor calls from this driver, a third of them
on each node, one in 500 failing, plus a parent on node 0 calling children one at a time
on nodes 1 and 2: each call leaves three events (its ``call.submit`` here, its
``call.start`` and ``call.end`` where it ran), so 100,000 calls are 300,000 events. Then,
in interleaved rounds (rotating order):

- ``collect+report``: ``collect()`` into a fresh folder (every byte copied), ``report()``;
- ``on nodes`` and its twin ``on nodes (2)``: ``report(address=...)``: each node's reader
  tallies its files, the halves of submissions whose calls ran elsewhere go node to node,
  the caller merges (its twin gives the noise floor).

Printed: the event files' bytes, the bytes each way moves (into the caller: every
question and answer, pickled; node to node: the parts of the join), the median times,
and that both reports are equal (their ``to_dict()`` but the source).

Run: python benchmarks/cluster_report.py [--calls 100000] [--rounds 3]
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from _harness import arguments, floor, interleave

import raytrace_kit
from raytrace_kit import debuggable
from raytrace_kit._driver import readers
from raytrace_kit._reports.cluster import cluster_report

sys.path.insert(0, str(Path(__file__).parents[1]))  # the tests' cluster of separate nodes
from tests.helpers import node_cluster


@debuggable
@ray.remote(num_cpus=0)
class Worker:
    def step(self, i: int) -> int:
        if i % 500 == 499:
            msg = f"bad item {i}"
            raise ValueError(msg)
        return i


@debuggable
@ray.remote(num_cpus=0)
def child(i: int) -> int:
    return i


@debuggable
@ray.remote(num_cpus=0)
def parent(count: int) -> int:
    return sum(ray.get(child.options(resources={f"node{1 + k % 2}": 0.01}).remote(k))
               for k in range(count))  # fmt: skip


def workload(calls: int) -> None:
    workers = [Worker.options(resources={f"node{n}": 0.01}).remote() for n in range(3)]
    batch = 3000
    for start in range(0, calls, batch):
        refs = [workers[i % 3].step.remote(i) for i in range(start, min(start + batch, calls))]
        for ref in refs:
            with contextlib.suppress(ValueError):
                ray.get(ref)
    ray.get(parent.options(resources={"node0": 0.01}).remote(20))


def _without_source(report: raytrace_kit.Report) -> dict[str, Any]:
    data = report.to_dict()
    data["overview"].pop("source")
    return data


def main() -> None:
    args = arguments(__doc__, calls=100_000, rounds=3)
    work = Path(tempfile.mkdtemp(prefix="cluster-report-"))
    with node_cluster([work / "node1", work / "node2"]):
        began = time.perf_counter()
        workload(args.calls)
        print(f"workload: {args.calls:,} calls in {time.perf_counter() - began:.0f} s")
        raytrace_kit.open_session()  # this driver's submission records: on disk first
        moved: dict[str, list[int]] = {"caller": [], "nodes": [], "collected": []}
        made: dict[str, Any] = {}

        def collected() -> float:
            dest = work / f"collected-{time.monotonic_ns()}"
            began = time.perf_counter()
            made["collected"] = raytrace_kit.report(raytrace_kit.collect(dest, profiles=False))
            took = time.perf_counter() - began
            moved["collected"].append(sum(f.stat().st_size for f in dest.rglob("*.jsonl")))
            shutil.rmtree(dest)
            return took

        def on_nodes() -> float:
            began = time.perf_counter()
            reading = readers.Readers(measure=True)
            try:
                made["nodes"] = cluster_report(
                    reading.ask, len(reading), since=None, until=None, source="cluster"
                )
                pieces = ray.get([actor.pieces.remote() for actor in reading.actors])
            finally:
                reading.close()
            took = time.perf_counter() - began
            moved["caller"].append(reading.moved)
            made["by"] = reading.moved_by
            moved["nodes"].append(
                sum(b for i, p in enumerate(pieces) for j, b in enumerate(p) if i != j)
            )
            return took

        samples = interleave(
            {"collect+report": collected, "on nodes": on_nodes, "on nodes (2)": on_nodes},
            args.rounds,
        )
        assert _without_source(made["nodes"]) == _without_source(made["collected"])
        files = sum(
            f.stat().st_size
            for root in (work / "node1", work / "node2", raytrace_kit.log_dir())
            for f in root.glob("events-*.jsonl")
        )
        events = made["nodes"].overview
        findings = len(made["nodes"].findings)
        print(f"\nevent files: {files:,} bytes; report: {events['calls']:,} calls, "
              f"{events['failed']} failed, {findings} findings (equal both ways)")  # fmt: skip
        into = statistics.median(moved["caller"])
        between = statistics.median(moved["nodes"])
        copied = statistics.median(moved["collected"])
        print(f"collect+report moves {copied:,.0f} bytes ({copied / files:.1%}) into the caller")
        print(f"on nodes moves {into:,.0f} bytes ({into / files:.2%}) into the caller, "
              f"{between:,.0f} ({between / files:.2%}) node to node: "
              f"{(into + between) / files:.2%} in all")  # fmt: skip
        print("  into the caller, by question: " + ", ".join(
            f"{method} {size:,}" for method, size in made["by"].items()))  # fmt: skip
        for label, values in samples.items():
            print(f"  {label:<16} {statistics.median(values):6.2f} s  (rounds: "
                  + ", ".join(f"{v:.2f}" for v in values) + ")")  # fmt: skip
        ratio = statistics.median(samples["on nodes"]) / statistics.median(
            samples["collect+report"]
        )
        print(f"  on nodes / collect+report: {ratio:.2f}x; noise floor "
              f"{floor(samples, 'on nodes', 'on nodes (2)'):.3f}x")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
