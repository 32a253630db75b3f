"""Bring every node's records to the driver, then read the run: failures, tree, memory.

A two-node cluster (ray.cluster_utils.Cluster) whose second node writes to a directory of
its own, as a separate machine would. A pipeline fans out tasks to both nodes; one input
makes a task fail there. collect() brings both nodes' files here through Ray, and
open_session() answers: what failed, where, with which traceback; which call started which.
The raytrace-kit command reads the same folder from a shell, saying first which run it
read; sessions() lists this machine's sessions with kit records, and the default one.

Run: python examples/sessions_and_collect.py   (starts its own two-node local cluster)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote(num_cpus=1)
def parse(record: str) -> int:
    return int(record)  # "n/a" fails here


@debuggable
@ray.remote(num_cpus=0)
def pipeline(records: list[str]) -> list[str]:
    refs = [parse.remote(r) for r in records]
    outcomes = []
    for ref in refs:
        try:
            outcomes.append(str(ray.get(ref)))
        except ValueError as error:  # a RayTaskError that is also a ValueError
            outcomes.append(f"failed: {type(error).__name__}")
    return outcomes


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
        cluster.add_node(num_cpus=1, env_vars={"RAYTRACE_LOG_DIR": str(Path(tmp, "node1"))})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            print(ray.get(pipeline.remote(["1", "2", "n/a", "4", "5", "6"])))
            dest = raytrace_kit.collect(Path(tmp, "collected"))
            name = raytrace_kit.log_dir().parents[1].name  # <session>/logs/raytrace_kit
        finally:
            ray.shutdown()
            cluster.shutdown()

        # Ray is gone: the collected files are all that is needed from here on.
        session = raytrace_kit.open_session(dest)
        calls = session.calls()
        nodes = {c.node_id for c in calls}
        print(f"\n{len(calls)} calls on {len(nodes)} node(s), collected into {dest}")
        for call in session.calls(status="error"):
            print(f"\n{call.function} failed on node {call.node_id[:12]} (pid {call.pid}):")
            print(call.traceback)
        (root,) = session.calls(function="pipeline")
        children = session.children(root)
        print(f"pipeline started {len(children)} calls: " + ", ".join(c.status for c in children))

        # Any other process can read the same folder, without Ray.
        script = "import sys, raytrace_kit as k; print(len(k.open_session(sys.argv[1]).calls()))"
        count = subprocess.run(  # noqa: S603 -- our own interpreter and script
            [sys.executable, "-c", script, str(dest)], capture_output=True, text=True, check=True
        ).stdout.strip()
        print(f"a fresh process reads {count} calls from {dest.name}/")
        assert int(count) == len(calls)

        # The same from a shell: the raytrace-kit command (python -m raytrace_kit).
        shown = subprocess.run(  # noqa: S603 -- our own interpreter and module
            [sys.executable, "-m", "raytrace_kit", "events", str(dest), "--status", "error"],
            capture_output=True,
            text=True,
            check=True,
        )
        print(f"$ raytrace-kit events {dest.name} --status error\n{shown.stdout}")
        print(f"(on stderr, which run it read)\n{shown.stderr}")
        assert "ValueError" in shown.stdout
        assert shown.stderr.startswith(f"raytrace-kit: {dest} (collected ")

        # The sessions on this machine with kit records: this run's is among them.
        listing = raytrace_kit.sessions()  # print(listing): a table, newest first
        (this,) = [summary for summary in listing if summary.name == name]
        print(f"{len(listing)} session(s) with kit records here; this run's: {this.calls} calls")
        print(f"commands read by default: {listing.default.name if listing.default else None}")


if __name__ == "__main__":
    main()
