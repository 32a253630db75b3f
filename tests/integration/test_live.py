"""A running 3-node cluster read where its files are: report --address, top, tail, top().

Nodes 1 and 2 write to their own directories (as separate machines do); the commands run
as a user runs them, in their own processes, attached to the cluster by its address.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import ray
from nbclient import NotebookClient
from ray.cluster_utils import Cluster

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers

pytestmark = pytest.mark.cluster

STEPS, FAILURES = 24, 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A head and two nodes, one CPU each, a resource naming each, nodes 1 and 2 apart."""
    directories = [tmp_path_factory.mktemp(f"live-node{i}") for i in (1, 2)]
    with helpers.node_cluster(directories) as made:
        yield made


@debuggable
@ray.remote(num_cpus=0)
def step(seconds: float) -> str:
    time.sleep(seconds)
    return ray.get_runtime_context().get_node_id()


@debuggable
@ray.remote(num_cpus=0)
def parse(text: str) -> int:
    return int(text)


@debuggable
@ray.remote(num_cpus=0)
def fan_out() -> int:
    # One at a time, on nodes 1 and 2 in turn: the ray.get-in-a-loop pattern, across nodes.
    return len([ray.get(step.options(resources={f"node{1 + k % 2}": 0.01}).remote(0.02))
                for k in range(6)])  # fmt: skip


@pytest.fixture(scope="module")
def workload(cluster: Cluster) -> dict[str, Any]:
    """A run over the three nodes: steps (one a straggler), failures, a serial fan-out."""
    refs = [
        step.options(resources={f"node{i % 3}": 0.01}).remote(2.5 if i == STEPS - 1 else 0.02)
        for i in range(STEPS)
    ]
    nodes = set(ray.get(refs))
    for i in range(FAILURES):
        with pytest.raises(ValueError, match="invalid literal"):
            ray.get(parse.options(resources={f"node{1 + i % 2}": 0.01}).remote(f"x{i}"))
    assert ray.get(fan_out.options(resources={"node0": 0.01}).remote()) == 6
    return {"nodes": nodes, "address": cluster.address}


def _without_source(data: dict[str, Any]) -> dict[str, Any]:
    data["overview"].pop("source")
    return data


def test_report_on_the_nodes_is_the_report_of_the_collected_files(
    workload: dict[str, Any],
) -> None:
    """Report --address: the same report as collect() then report(), computed on the nodes."""
    done = helpers.run_cli("report", "--address", workload["address"], "--json")
    assert done.returncode == 0, done.stderr
    assert f"cluster {workload['address']}" in done.stderr  # which cluster was read, said
    on_nodes = json.loads(done.stdout)
    collected = raytrace_kit.report(raytrace_kit.collect())
    assert _without_source(on_nodes) == _without_source(json.loads(json.dumps(collected.to_dict())))
    # Not equal by being empty: what the run did across nodes is in both.
    assert on_nodes["overview"]["nodes"] == 3
    assert on_nodes["overview"]["failed"] == FAILURES
    titles = [finding["title"] for finding in on_nodes["findings"]]
    assert f"A straggler: {__name__}.step" in titles
    assert f"Calls submitted and waited on one at a time by {__name__}.fan_out" in titles


def test_top_once_counts_every_node(workload: dict[str, Any]) -> None:
    """Top --once --json: each function's calls done and failed on all nodes, the failures."""
    done = helpers.run_cli("top", "--address", workload["address"], "--once", "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    rows = {row["function"]: row for row in view["functions"]}
    assert rows[f"{__name__}.step"]["done"] == STEPS + 6
    assert rows[f"{__name__}.parse"]["failed"] == FAILURES
    assert {row["running"] for row in rows.values()} == {0}
    assert {row["pending"] for row in rows.values()} == {0}
    assert {node["node_id"] for node in view["nodes"]} == workload["nodes"]
    errors = [f["error"] for f in view["failures"]]
    assert "ValueError: invalid literal for int() with base 10: 'x2'" in errors
    (straggler,) = [s for s in view["stragglers"] if s["function"] == f"{__name__}.step"]
    assert straggler["state"] == "finished"
    assert straggler["running_s"] >= 2.5


@debuggable
@ray.remote(num_cpus=0)
class Ticker:
    def tick(self, i: int) -> int:
        return i


def _plain_driver_sockets(address: str) -> int:
    """How many TCP sockets a plain Ray driver attached to ``address`` listens on."""
    code = (
        "import sys, time, ray\n"
        "from raytrace_kit import _ray_compat\n"
        "_ray_compat.token_auth_for_attach()\n"
        f"ray.init(address={address!r}, log_to_driver=False)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    plain = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL
    )
    try:
        assert plain.stdout is not None
        assert plain.stdout.readline().strip() == "ready"
        return len(helpers.listening_sockets(plain.pid))
    finally:
        plain.kill()
        plain.wait()


def test_tail_follows_another_node_in_order_and_opens_no_port(
    workload: dict[str, Any],
) -> None:
    """tail: an actor's calls on node 2 show as they are written, in order; no port opened."""
    ticker = Ticker.options(resources={"node2": 0.01}).remote()
    follower = subprocess.Popen(
        helpers.cli_command(
            "tail", "--address", workload["address"], "--json", "--function", "tick"
        ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[dict[str, Any]] = []
    said: list[str] = []  # its stderr, drained as it comes (a full pipe would block it)
    readers = [
        threading.Thread(target=target, daemon=True)
        for target in (
            lambda: lines.extend(json.loads(line) for line in follower.stdout or []),
            lambda: said.extend(follower.stderr or []),
        )
    ]
    for reader in readers:
        reader.start()
    node2 = next(n["NodeID"] for n in ray.nodes() if "node2" in n["Resources"])

    def ends() -> int:
        return sum(e["event"] == "call.end" for e in list(lines))

    try:

        def seen_one() -> bool:
            ray.get(ticker.tick.remote(0))  # until the follower has started reading
            return ends() > 0

        helpers.wait_until(seen_one, "tail shows a call of node 2")
        before = ends()
        for i in range(1, 6):
            ray.get(ticker.tick.remote(i))
        helpers.wait_until(lambda: ends() >= before + 5, "tail shows the next calls")
        ours = [e for e in list(lines) if e["event"] in {"call.start", "call.end"}]
        ours = ours[[e["event"] for e in ours].index("call.start") :]  # from a whole call
        assert {e["node_id"] for e in ours} == {node2}  # another node than tail's own
        # In order, as the process wrote them: a start, its end, the next start...
        calls = len(ours) // 2
        assert [e["event"] for e in ours[: 2 * calls]] == ["call.start", "call.end"] * calls
        assert [e["call_id"] for e in ours[: 2 * calls : 2]] == [
            e["call_id"] for e in ours[1 : 2 * calls : 2]
        ]
        stamps = [e["timestamp"] for e in ours]
        assert stamps == sorted(stamps)
        # Ray's own listening sockets, and not one more.
        assert len(helpers.listening_sockets(follower.pid)) == _plain_driver_sockets(
            workload["address"]
        )
    finally:
        follower.send_signal(signal.SIGINT)  # Ctrl-C: it stops, as a user stops it
        try:
            code = follower.wait(timeout=60)
        except subprocess.TimeoutExpired:  # say where it hangs: faulthandler's stacks
            follower.send_signal(signal.SIGABRT)
            follower.wait(timeout=30)
            readers[1].join(timeout=30)  # the pipe read to its end
            code = None
        ray.kill(ticker)
        assert code == 0, "".join(said)[-20_000:]


class _Counting(NotebookClient):
    """A notebook client that counts the in-place updates of displays."""

    updates = 0

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        if msg.get("msg_type") == "update_display_data":
            type(self).updates += 1
        return super().process_message(msg, cell, cell_index)


def test_top_in_a_notebook_refreshes_its_cell(workload: dict[str, Any], tmp_path: Path) -> None:
    """raytrace_kit.top() in a notebook: one view in the cell's output, redrawn in place."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import raytrace_kit\n"
            f"raytrace_kit.top(address={workload['address']!r}, interval=0.5, duration=3)"
        )
    ]
    client = _Counting(notebook, timeout=180, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}})  # fmt: skip
    client.execute()
    (cell,) = notebook.cells
    shown = [o for o in cell.outputs if o.get("output_type") == "display_data"]
    assert len(shown) == 1, cell.outputs  # one view, updated: not a new one per refresh
    assert _Counting.updates >= 2
    rows = helpers.table_rows(shown[0]["data"]["text/html"])
    functions = {row[0]: row for row in rows if len(row) == 7 and row[1].isdigit()}
    assert functions[f"{__name__}.step"][3] == str(STEPS + 6)  # done, on every node
