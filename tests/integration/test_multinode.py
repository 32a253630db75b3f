"""Multi-node, as separate machines: each node writes to its own directory.

Nodes 1 and 2 get their own ``RAYTRACE_LOG_DIR`` (``add_node(env_vars=...)``), so their
files are where another machine's would be: out of the driver's reach but through
``collect()``, which these tests use to read them, as a user would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers


def events_of(function: Any, event: str | None = None) -> list[dict[str, Any]]:
    """This test's events of ``function``, from every node (collected first)."""
    name = f"{function.__module__}.{function.__qualname__}"
    session = raytrace_kit.open_session(raytrace_kit.collect())
    return [
        e
        for e in session.events(event=event)
        if e["timestamp"] >= helpers.window_start()
        and (e.get("function") == name or str(e.get("function")).startswith(name + "."))
    ]


pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def node_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Where nodes 1 and 2 write (node 0, the head, writes to the session directory)."""
    return [tmp_path_factory.mktemp(f"node{i}") for i in (1, 2)]


@pytest.fixture(scope="module")
def three_nodes(node_dirs: list[Path]) -> Iterator[Cluster]:
    """A head and two worker nodes, each with one CPU, a resource naming it, its own dir."""
    if ray.is_initialized():
        ray.shutdown()  # a driver connects to one cluster; the shared one restarts later
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"node0": 1},
            "include_dashboard": False,
        },
    )
    for i, directory in zip((1, 2), node_dirs, strict=True):
        cluster.add_node(
            num_cpus=1,
            resources={f"node{i}": 1},
            env_vars={"RAYTRACE_LOG_DIR": str(directory)},
        )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@debuggable
@ray.remote(num_cpus=0)
def where() -> str:
    return ray.get_runtime_context().get_node_id()


@debuggable
@ray.remote(num_cpus=0)
class Resident:
    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def test_each_node_events_carry_its_node_id(three_nodes: Cluster) -> None:
    """Tasks and actors on three nodes log their own node's id, in per-node files."""
    node_ids = []
    for i in range(3):
        node_id = ray.get(where.options(resources={f"node{i}": 0.01}).remote())
        node_ids.append(node_id)
    assert len(set(node_ids)) == 3

    resident = Resident.options(resources={"node2": 0.01}).remote()
    assert ray.get(resident.node.remote()) == node_ids[2]

    ends = events_of(where, "call.end")
    assert [e["node_id"] for e in ends] == node_ids
    actor_ends = events_of(Resident, "call.end")
    assert {e["node_id"] for e in actor_ends} == {node_ids[2]}
    # Each node's files were collected into a folder of its own.
    collected = raytrace_kit.log_dir().parent.parent / "collected"
    for end in ends + actor_ends:
        name = f"node-{end['node_id'][:12]}/events-{end['node_id'][:12]}-{end['pid']}.jsonl"
        assert end["call_id"] in (collected / name).read_text()


@debuggable(profile="memray")
@ray.remote(num_cpus=0)
def allocate_here(mib: int) -> str:
    buffer = bytearray(mib * 1024 * 1024)
    del buffer
    return ray.get_runtime_context().get_node_id()


def test_profiles_on_every_node(three_nodes: Cluster) -> None:
    """Per-call captures on three nodes: distinct files, sidecars carry each node's id."""
    node_ids = [
        ray.get(allocate_here.options(resources={f"node{i}": 0.01}).remote(5)) for i in range(3)
    ]
    assert len(set(node_ids)) == 3
    ends = events_of(allocate_here, "call.end")
    assert [e["node_id"] for e in ends] == node_ids
    paths = [Path(e["profile_path"]) for e in ends]
    assert len(set(paths)) == 3
    for path, node_id in zip(paths, node_ids, strict=True):
        meta = json.loads(path.with_suffix(".json").read_text())
        assert meta["node_id"] == node_id
        assert meta["peak_memory_bytes"] >= 5 * 1024 * 1024


def test_collect_every_node_then_read_anywhere(
    three_nodes: Cluster, node_dirs: list[Path], tmp_path: Path
) -> None:
    """collect() brings each node's calls here; open_session() reads them, in a new process.

    Run again, it copies nothing that did not change.
    """
    node_ids = [ray.get(where.options(resources={f"node{i}": 0.01}).remote()) for i in range(3)]
    resident = Resident.options(resources={"node1": 0.01}).remote()
    ray.get(resident.node.remote())
    # The nodes' own directories hold their files: the driver cannot read them there.
    assert list(node_dirs[0].glob("events-*.jsonl"))
    dest = raytrace_kit.collect(tmp_path / "collected")
    calls = raytrace_kit.open_session(dest).calls(function="where")
    assert {c.node_id for c in calls} >= set(node_ids)
    assert {c.status for c in calls} == {"ok"}
    record = json.loads((dest / "collect.json").read_text())["nodes"]
    assert {r["status"] for r in record.values()} == {"collected"}
    assert len(record) == 3

    script = (
        "import sys, raytrace_kit; s = raytrace_kit.open_session(sys.argv[1]);"
        "print(sorted({c.node_id for c in s.calls(function='where')}))"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", script, str(dest)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert set(json.loads(fresh.stdout.replace("'", '"'))) >= set(node_ids)

    again = raytrace_kit.collect(tmp_path / "collected")
    record = json.loads((again / "collect.json").read_text())["nodes"]
    copied = {r["node_id"]: r["bytes_copied"] for r in record.values()}
    assert copied[node_ids[2]] == 0  # an idle node: nothing changed, nothing copied
    assert len(raytrace_kit.open_session(again).calls(function="where")) == len(calls)

    # Into the head node's own directory, twice: earlier copies are not copied again.
    inside = raytrace_kit.log_dir() / "collected-here"
    for _ in range(2):
        raytrace_kit.collect(inside)
    assert not list(inside.glob("node-*/collected-here"))


@debuggable
@ray.remote(num_cpus=0)
class Asker:
    def ask(self, other: Any, me: Any) -> int:
        return ray.get(other.answer.remote(me))  # Asker.ask waits

    def reply(self) -> int:
        return 1


@debuggable
@ray.remote(num_cpus=0)
class Answerer:
    def answer(self, asker: Any) -> int:
        return ray.get(asker.reply.remote())  # Answerer.answer waits


def _line(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def test_stuck_reads_every_node_and_names_a_deadlock_across_two(three_nodes: Cluster) -> None:
    """Actors on nodes 1 and 2 waiting on each other: one cycle, each call on its node.

    A call the driver submitted that ran and ended on node 1 is not pending: its record
    is on the head's directory and its end on node 1's (the second phase reads both).
    """
    nodes = {ray.get(where.options(resources={f"node{i}": 0.01}).remote()): i for i in range(3)}
    asker = Asker.options(resources={"node1": 0.01}).remote()
    answerer = Answerer.options(resources={"node2": 0.01}).remote()
    asker.ask.remote(answerer, asker)
    found = None

    def deadlocked() -> bool:
        nonlocal found
        found = raytrace_kit.stuck()
        return bool(found.deadlocks)

    helpers.wait_until(deadlocked, "the deadlock, seen from every node")
    assert found is not None
    (cycle,) = found.deadlocks
    assert [c.function.rsplit(".", 2)[-2:] for c in cycle] == [
        ["Asker", "ask"], ["Answerer", "answer"], ["Asker", "reply"],
    ]  # fmt: skip
    assert [nodes.get(c.node_id or "") for c in cycle[:2]] == [1, 2]
    assert [c.where for c in cycle] == [
        f"{__file__}:{_line('Asker.ask waits')}",
        f"{__file__}:{_line('Answerer.answer waits')}",
        f"{__file__}:{_line('Answerer.answer waits')}",
    ]
    assert not [f for f in found.pending if f.function.endswith(".where")]
    ray.kill(asker)
    ray.kill(answerer)


def test_node_pinning(three_nodes: Cluster) -> None:
    """pin=<node id>: every call (or the actor) runs on that node; a dead node errors."""
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 3
    for node_id in nodes:
        pinned = debuggable(pin=node_id)(where)
        assert set(ray.get([pinned.remote() for _ in range(3)])) == {node_id}
        resident = Resident.with_debug(pin=node_id).remote()
        assert ray.get(resident.node.remote()) == node_id
        ray.kill(resident)
    both = debuggable(pin=raytrace_kit.Pin(node_id=nodes[1]))(where)
    assert ray.get(both.remote()) == nodes[1]
    assert both.pinned_worker().node_id == nodes[1]
    both.unpin()

    # A worker node, not the one the driver is connected to (Ray 2.40 connects the driver
    # to a raylet of this machine's, not always the head's; removing it breaks the driver).
    driver_node = ray.get_runtime_context().get_node_id()
    doomed = [n for n in three_nodes.worker_nodes if n.node_id != driver_node][-1]
    doomed_id = doomed.node_id
    three_nodes.remove_node(doomed)
    deadline = time.monotonic() + 60
    while any(n["NodeID"] == doomed_id and n["Alive"] for n in ray.nodes()):
        assert time.monotonic() < deadline, "the removed node never died"
        time.sleep(0.5)
    time.sleep(1.1)  # past the second for which a node found alive is trusted
    with pytest.raises(raytrace_kit.NodeNotFoundError, match="is dead"):
        debuggable(pin=doomed_id)(where).remote()


def test_collect_reports_a_dead_node(three_nodes: Cluster, tmp_path: Path) -> None:
    """After test_node_pinning removed a node: one warning naming it, the rest collected."""
    dead = [n["NodeID"] for n in ray.nodes() if not n["Alive"]]
    assert dead
    with pytest.warns(raytrace_kit.RaytraceKitWarning, match=dead[0][:12]):
        dest = raytrace_kit.collect(tmp_path)
    record = json.loads((dest / "collect.json").read_text())["nodes"]
    assert record[dead[0]]["status"] == "dead"
    assert sum(r["status"] == "collected" for r in record.values()) == 2
