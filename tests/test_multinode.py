"""Multi-node: each node's events carry that node's id (ray.cluster_utils.Cluster)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

import raytrace_kit
from raytrace_kit import debuggable

from .conftest import events_of

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[Cluster]:
    """A head and two worker nodes, each with one CPU and a resource naming it."""
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
    for i in (1, 2):
        cluster.add_node(num_cpus=1, resources={f"node{i}": 1})
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
    # The nodes share this machine's session directory; node ids keep files apart.
    for end in ends + actor_ends:
        name = f"events-{end['node_id'][:12]}-{end['pid']}.jsonl"
        assert end["call_id"] in (raytrace_kit.log_dir() / name).read_text()


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

    doomed = three_nodes.list_all_nodes()[-1]
    doomed_id = doomed.node_id
    three_nodes.remove_node(doomed)
    deadline = time.monotonic() + 60
    while any(n["NodeID"] == doomed_id and n["Alive"] for n in ray.nodes()):
        assert time.monotonic() < deadline, "the removed node never died"
        time.sleep(0.5)
    time.sleep(1.1)  # past the second for which a node found alive is trusted
    with pytest.raises(raytrace_kit.NodeNotFoundError, match="is dead"):
        debuggable(pin=doomed_id)(where).remote()
