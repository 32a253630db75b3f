"""What the caller pays at 100 nodes: the merge of simulated node shares, report and top.

No cluster: the answers 100 nodes would send are made up in the shape the readers send
them (``_reports/cluster/partial.py``, ``joins.py``, ``live/aggregates.py``), with --calls
calls per node (three events each: 333,333 a node is 100 million events in all), 20 functions, one
call in 500 failing, every call submitted on one node and run on another (the worst
case for the join). The same packed arrays are reused for every node (making them is
not what is measured). Then:

- ``report``: :func:`merge.cluster_report` over the 100 answers (the nodes' work is
  theirs; this is the caller's): time, the caller's peak memory, bytes a node sends;
- ``top``: one refresh's merge of 100 nodes' live states, and a state's bytes.

Run: python benchmarks/merge_scale.py [--nodes 100] [--calls 333333]
"""

from __future__ import annotations

import argparse
import pickle
import random
import resource
import time
from array import array
from typing import Any

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.cluster import cluster_report, from_micros
from raytrace_kit._reports.live import OLDEST, bin_value, merge
from raytrace_kit._reports.reading import DriverRecord
from raytrace_kit._reports.run import (
    BlockedLoops,
    ByValue,
    DataOps,
    FailureGroup,
    Function,
    LaneTotal,
    RunSums,
    pack_floats,
)

FUNCTIONS = 20


def _durations(count: int) -> list[float]:
    return [round(random.lognormvariate(-4, 1), 6) for _ in range(count)]


def _waits(count: int) -> list[float]:
    """Times in queue as a report computes them: the difference of two stamps' floats."""
    submitted = 1_795_000_000_000_000  # microseconds since the epoch
    found = []
    for _ in range(count):
        waited = round(random.lognormvariate(-3, 1.5) * 1e6)
        found.append(max(from_micros(submitted + waited) - from_micros(submitted), 0.0))
        submitted += 997
    return found


def node_answers(calls: int) -> dict[str, Any]:
    """One node's answers to the five questions (shared by every node: same bytes)."""
    per = calls // FUNCTIONS
    slowest = Call(call_id="ab" * 8, function="jobs.f0", status="ok", duration_s=9.0,
                   started="2026-11-22T10:00:00.000000+00:00",
                   ended="2026-11-22T10:00:09.000000+00:00", task_id="cd" * 24)  # fmt: skip
    sums = RunSums()
    sums.calls, sums.failed, sums.processes = calls, calls // 500, 8
    sums.nodes = {"n"}
    sums.first, sums.last = "2026-11-22T10:00:00.000000+00:00", "2026-11-22T11:00:00.000000+00:00"
    for i in range(FUNCTIONS):
        function = sums.functions[f"jobs.f{i}"] = Function()
        function.durations = array("d", _durations(per))
        function.slowest, function.slowest_start = slowest, b"{}"
        function.growth, function.private, function.task = 2**20, 2**21, True
    for i in range(5):
        group = FailureGroup(f"jobs.f{i}", "ValueError", sums.first)
        group.count, group.last = calls // 500 // 5, sums.last
        group.traceback = "Traceback (most recent call last):\n" + "  line\n" * 40
        group.task_ids, group.nodes = ["ef" * 24] * min(1000, calls // 500 // 5), {"n"}
        sums.failures[group.function, group.error_type] = group
    sums.failed_tasks = {random.getrandbits(64) for _ in range(calls // 500)}
    sums = pickle.loads(pickle.dumps(sums))  # noqa: S301 -- ours; as a node sends it: packed
    tally = {
        "sums": sums,
        "lanes": [LaneTotal(False, calls // 8)] * 8,
        "waits": [],
        "queues": {
            "count": calls,
            "waits": {},
            "first": {},
            "stuck": [],
            "actors": {},
            "sites": {"main.py:12": 0},
            "backlog": {},
            "called": {},
            "killed": [],
            "made": {},
            "by_value": ByValue().summary(),
        },
        "blocked": BlockedLoops().to_dict(),
        "data": DataOps().to_dict(),
        "split_calls": 0,
    }
    waits = {
        f"jobs.f{i}": pack_floats([w * 1.5 for w in _durations(per)]) for i in range(FUNCTIONS)
    }
    join = {"waits": waits, "first": {f"jobs.f{i}": i for i in range(FUNCTIONS)},
            "never": [], "never_count": 0, "actors": {}, "backlog": {}}  # fmt: skip
    details = {"names": {}, "lanes": {}, "logs": None, "deaths": {}, "task_ids": {}}
    prepare = {"driver": DriverRecord(), "submissions": True, "files": 8}
    ends = {"loops": [], "shared": {}}  # the driver's lines, judged on its node
    return {"prepare": prepare, "tally": tally, "split": [None], "join": join, "ends": ends,
            "details": details}  # fmt: skip


def live_state(processes: int = 30) -> dict[str, Any]:
    """One node's state at a refresh of top (what ``NodeReader.look`` sends)."""
    bins = {bin_value(d): 1 for d in _durations(2000)}
    flying = {"function": "jobs.f0", "call_id": "ab" * 8, "task_id": "cd" * 24,
              "node_id": "n" * 56, "pid": 1234, "attempt": 0,
              "started": "2026-11-22T10:00:00.000000+00:00",
              "running_s": 12.5, "where": "/app/jobs.py:120", "state": "running"}  # fmt: skip
    failure = {"function": "jobs.f3", "call_id": "ab" * 8, "task_id": "cd" * 24,
               "node_id": "n" * 56, "pid": 1234, "ended": "2026-11-22T10:00:00.000000+00:00",
               "error": "ValueError: " + "x" * 100}  # fmt: skip
    finished = {**flying, "running_s": 9.0, "state": "finished"}
    return {
        "time": time.time(), "events": 10**6, "node_id": "n" * 56, "behind": 0, "cpu_share": 0.03,
        "functions": {f"jobs.f{i}": [4, 10**4, 10**4, 10**4, 20, 0, bins, [finished] * 3]
                      for i in range(FUNCTIONS)},
        "oldest": [flying] * (OLDEST + 3 * FUNCTIONS),
        "failures": [failure] * 10,
        "processes": [{"pid": p, "rss_bytes": 2**28, "last": "2026-11-22T10:00:00",
                       "node_id": "n" * 56} for p in range(processes)],
    }  # fmt: skip


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--calls", type=int, default=333_333, help="calls per node")
    args = parser.parse_args()
    random.seed(1)
    answers = node_answers(args.calls)
    sent = {q: len(pickle.dumps(a)) for q, a in answers.items()}
    events = 3 * args.calls
    print(f"\n{args.nodes} nodes x {args.calls:,} calls ({events * args.nodes / 1e6:.0f} million "
          f"events); a node sends the caller {sum(sent.values()) / 2**20:.2f} MiB "
          f"({sum(sent.values()) / args.calls:.2f} bytes a call; "
          + ", ".join(f"{q} {b / 2**10:,.0f} KiB" for q, b in sent.items()) + ")")  # fmt: skip

    def ask(method: str, arguments: list[tuple[Any, ...]]) -> list[Any]:
        if method == "split":  # references to the parts, in a cluster: not the caller's bytes
            return [[None] * args.nodes] * len(arguments)
        if method == "join":
            return [{**answers["join"], "back": [None] * args.nodes}] * len(arguments)
        return [answers[method]] * len(arguments)

    before = _peak_mib()
    began = time.perf_counter()
    report = cluster_report(ask, args.nodes, since=None, until=None, source="simulated")
    took = time.perf_counter() - began
    per_call = took / (args.nodes * args.calls) * 1e6
    calls = report.overview["calls"]
    print(f"report: merged in {took:.1f} s ({per_call:.2f} us a call); the caller's peak "
          f"memory rose {_peak_mib() - before:,.0f} MiB ({calls:,} calls)")  # fmt: skip

    state = live_state()
    states = [state] * args.nodes
    view = merge("simulated", states, None, [])
    began = time.perf_counter()
    for _ in range(10):
        view = merge("simulated", states, view, [])
    refresh = (time.perf_counter() - began) / 10
    size = len(pickle.dumps(state))
    print(f"top: a node sends {size / 2**10:.1f} KiB a refresh; the caller merges "
          f"{args.nodes} in {refresh * 1e3:.0f} ms ({args.nodes * size / 2**20:.1f} MiB a "
          "refresh in all)")  # fmt: skip


if __name__ == "__main__":
    main()
