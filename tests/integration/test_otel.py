"""The call tree of a real run on two nodes, as OpenTelemetry traces (issue 25's acceptance).

A three-level fan-out of 1,000 calls (a root, 9 calls it submits, 990 they submit, ten of
which fail) runs on a 2-node ``Cluster`` whose second node writes to its own directory,
as another machine would. After ``collect()``, the run is exported three ways: to a real
OTLP/HTTP receiver on 127.0.0.1 by the command line, to the SDK's in-memory exporter by
``Session.to_otel``, and to an OTLP JSON file. Each span's parent is checked against the
tree Ray itself reports (each call returns the task ids of the calls it submitted).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from ray.cluster_utils import Cluster
from ray.exceptions import WorkerCrashedError

import raytrace_kit
from raytrace_kit import debuggable, get_logger
from tests import helpers
from tests.otlp import Receiver, receiver
from tests.otlp import json_values as values

pytestmark = pytest.mark.cluster

MIDS, LEAVES_PER_MID = 9, 110  # 1 + 9 + 990 = 1,000 calls


@debuggable
@ray.remote(num_cpus=0.25)
def leaf(index: int) -> int:
    if index % 100 == 7:
        raise ValueError(f"leaf {index} failed")
    return index


@debuggable
@ray.remote(num_cpus=0)
def middle(first: int) -> tuple[str, list[str], list[str]]:
    """Submits its leaves; returns its task id, theirs, and those of the failed ones."""
    get_logger().info("middle.started", leaves=LEAVES_PER_MID)
    refs = [
        leaf.options(scheduling_strategy="SPREAD").remote(index)
        for index in range(first, first + LEAVES_PER_MID)
    ]
    failed = []
    for ref in refs:
        try:
            ray.get(ref)
        except ValueError:
            failed.append(ref.task_id().hex())
    return ray.get_runtime_context().get_task_id(), [r.task_id().hex() for r in refs], failed


@debuggable
@ray.remote(num_cpus=0)
def root() -> tuple[str, list[Any]]:
    refs = [
        middle.options(scheduling_strategy="SPREAD").remote(m * LEAVES_PER_MID) for m in range(MIDS)
    ]
    return ray.get_runtime_context().get_task_id(), ray.get(refs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A head and a worker node with its own log directory (as another machine has)."""
    if ray.is_initialized():
        ray.shutdown()  # a driver connects to one cluster; the shared one restarts later
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "resources": {"head": 1}, "include_dashboard": False},
    )
    cluster.add_node(
        num_cpus=2, env_vars={"RAYTRACE_LOG_DIR": str(tmp_path_factory.mktemp("node1"))}
    )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


class Tree:
    """The run as Ray reports it: each task's parent task, the failed ones, the root."""

    def __init__(self, result: tuple[str, list[Any]]) -> None:
        self.root, middles = result
        self.parent: dict[str, str | None] = {self.root: None}
        self.failed: set[str] = set()
        for middle_task, leaves, failed in middles:
            self.parent[middle_task] = self.root
            self.parent.update(dict.fromkeys(leaves, middle_task))
            self.failed.update(failed)


@pytest.fixture(scope="module")
def run(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Tree, Path]:
    """The fan-out, run; every node's files collected here."""
    tree = Tree(ray.get(root.remote()))
    assert len(tree.parent) == 1000
    assert len(tree.failed) == 10
    return tree, raytrace_kit.collect(tmp_path_factory.mktemp("collected"))


def check(spans: list[dict[str, Any]], tree: Tree) -> None:
    """What the acceptance asks, of spans as plain dicts (any of the three exports)."""
    assert len(spans) == 1000
    task_of_span = {span["span_id"]: span["attributes"]["ray.task_id"] for span in spans}
    parents = {
        span["attributes"]["ray.task_id"]: task_of_span.get(span["parent_id"])
        if span["parent_id"]
        else None
        for span in spans
    }
    assert parents == tree.parent  # every parent link right, across both nodes
    trace = hashlib.sha256(tree.root.encode()).hexdigest()[:32]
    assert {span["trace_id"] for span in spans} == {trace}
    errors = {s["attributes"]["ray.task_id"]: s for s in spans if s["status"] == 2}
    assert set(errors) == tree.failed
    for span in errors.values():
        (exception,) = [e for e in span["events"] if e["name"] == "exception"]
        index = int(span["message"].split()[2])
        assert span["message"] == f"ValueError: leaf {index} failed"
        assert exception["exception.type"] == "ValueError"
        assert exception["exception.message"] == f"leaf {index} failed"
        assert 'raise ValueError(f"leaf {index} failed")' in exception["exception.stacktrace"]
    middles = [s for s in spans if s["name"].endswith(".middle")]
    assert len(middles) == MIDS
    for span in middles:
        (logged,) = span["events"]
        assert (logged["name"], logged["leaves"]) == ("middle.started", LEAVES_PER_MID)
    # Each .remote() left a call.submit: every span says how long its call waited to start.
    queued = [span["attributes"].get("ray.queue_time_s") for span in spans]
    assert all(wait is not None and wait >= 0 for wait in queued), queued
    nodes = {span["resource"]["ray.node_id"] for span in spans}
    assert len(nodes) == 2  # the spread reached both nodes
    assert {span["resource"]["host.name"] for span in spans} == {socket.gethostname()}


def from_proto(received: list[Any]) -> list[dict[str, Any]]:
    def values(pairs: Any) -> dict[str, Any]:
        return {p.key: getattr(p.value, p.value.WhichOneof("value")) for p in pairs}

    return [
        {
            "span_id": r.span.span_id.hex(),
            "parent_id": r.span.parent_span_id.hex(),
            "trace_id": r.span.trace_id.hex(),
            "name": r.span.name,
            "status": r.span.status.code,
            "message": r.span.status.message,
            "attributes": values(r.span.attributes),
            "events": [{"name": e.name, **values(e.attributes)} for e in r.span.events],
            "resource": r.resource,
        }
        for r in received
    ]


@pytest.fixture
def collector() -> Iterator[Receiver]:
    yield from receiver()


def test_received_by_an_otlp_http_receiver(run: tuple[Tree, Path], collector: Receiver) -> None:
    tree, collected = run
    done = helpers.run_cli("export", "otlp", str(collected), "--endpoint", collector.url)
    assert done.returncode == 0, done.stderr
    assert "1000 spans in 1 trace (10 failed)" in done.stdout
    check(from_proto(collector.spans), tree)


def test_handed_to_the_sdk_in_memory_exporter(run: tuple[Tree, Path]) -> None:
    tree, collected = run
    exporter = InMemorySpanExporter()
    assert raytrace_kit.open_session(collected).to_otel(exporter) == 1000
    spans = [
        {
            "span_id": f"{s.context.span_id:016x}",
            "parent_id": f"{s.parent.span_id:016x}" if s.parent else "",
            "trace_id": f"{s.context.trace_id:032x}",
            "name": s.name,
            "status": 2 if s.status.status_code is StatusCode.ERROR else 0,
            "message": s.status.description or "",
            "attributes": dict(s.attributes or {}),
            "events": [{"name": e.name, **dict(e.attributes or {})} for e in s.events],
            "resource": dict(s.resource.attributes),
        }
        for s in exporter.get_finished_spans()
    ]
    check(spans, tree)


def test_written_to_an_otlp_json_file(run: tuple[Tree, Path], tmp_path: Path) -> None:
    tree, collected = run
    target = tmp_path / "traces.jsonl"
    done = helpers.run_cli("export", "otlp-json", str(collected), "-o", str(target))
    assert done.returncode == 0, done.stderr

    spans = [
        {
            "span_id": span["spanId"],
            "parent_id": span.get("parentSpanId", ""),
            "trace_id": span["traceId"],
            "name": span["name"],
            "status": span["status"].get("code", 0),
            "message": span["status"].get("message", ""),
            "attributes": values(span["attributes"]),
            "events": [
                {"name": e["name"], **values(e["attributes"])} for e in span.get("events", [])
            ],
            "resource": values(rs["resource"]["attributes"]),
        }
        for line in target.read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for span in rs["scopeSpans"][0]["spans"]
    ]
    check(spans, tree)


@debuggable
@ray.remote(num_cpus=0, resources={"head": 0.01})
def quick(n: int) -> int:
    return n


@debuggable
@ray.remote(num_cpus=0, resources={"head": 0.01})
def waits_for(path: str) -> int:
    total = sum(ray.get([quick.remote(n) for n in range(3)]))
    while not Path(path).exists():
        time.sleep(0.05)
    return total


def test_follow_sends_spans_as_calls_end(
    cluster: Cluster, collector: Receiver, tmp_path: Path
) -> None:
    """While a call runs, the calls it submitted that ended are already in its trace."""
    session_dir = Path(helpers.ray_session_dir())
    follower = subprocess.Popen(
        helpers.cli_command(
            "export", "otlp", str(session_dir), "--follow", "--endpoint", collector.url
        ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        gate = tmp_path / "go"
        outer = waits_for.remote(str(gate))

        def named(name: str) -> list[Any]:
            return [r for r in collector.spans if r.span.name.endswith(name)]

        deadline = time.monotonic() + 90
        while len(named(".quick")) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(named(".quick")) == 3, follower.stderr
        assert named(".waits_for") == []  # it still runs
        gate.touch()
        assert ray.get(outer) == 3
        while not named(".waits_for") and time.monotonic() < deadline:
            time.sleep(0.1)
        (span,) = named(".waits_for")
        for child in named(".quick"):
            assert child.span.parent_span_id == span.span.span_id
            assert child.span.trace_id == span.span.trace_id
    finally:
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert "raytrace-kit export: following" in err
    assert " spans in " in out  # what it sent, said at the end


@debuggable
@ray.remote(num_cpus=0, resources={"head": 0.01}, max_retries=0)
def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@debuggable
@ray.remote(num_cpus=0, resources={"head": 0.01})
def survives() -> str:
    try:
        ray.get(killed.remote())
    except WorkerCrashedError:
        return "crashed"
    return "not crashed"


def test_a_call_whose_worker_died_is_an_error_span_saying_why(cluster: Cluster) -> None:
    """It ends when its process was last heard of, in its parent's trace, with Ray's cause."""
    assert ray.get(survives.remote()) == "crashed"
    session = raytrace_kit.open_session(Path(helpers.ray_session_dir()))
    deadline = time.monotonic() + 60
    while True:  # Ray's record of the worker's exit is written as the raylet notices
        exporter = InMemorySpanExporter()
        session.to_otel(exporter)
        spans = {s.name.rsplit(".", 1)[-1]: s for s in exporter.get_finished_spans()}
        died = spans["killed"]
        if "vanished without Python" in (died.status.description or ""):
            break
        assert time.monotonic() < deadline, died.status.description
        time.sleep(0.5)
    assert died.status.status_code is StatusCode.ERROR
    assert died.status.description.startswith(
        "interrupted: its process ended during the call (no call.end); vanished without Python"
    )
    assert died.attributes["ray.call.status"] == "interrupted"
    assert died.end_time >= died.start_time
    parent = spans["survives"]
    assert died.parent is not None
    assert died.parent.span_id == parent.context.span_id
    assert died.context.trace_id == parent.context.trace_id
