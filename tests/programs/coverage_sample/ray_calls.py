"""The sample package's code run through Ray, on a 2-node cluster (run by test_coverage.py)."""

from __future__ import annotations

import glob
import os
import time

import pytest
import ray
from coverage import CoverageData
from ray.cluster_utils import Cluster
from sample import work

WORK = os.path.abspath(work.__file__)


def lines_on_disk() -> set[int]:
    """The lines of work.py that Ray's workers have saved so far."""
    found: set[int] = set()
    for path in glob.glob(".coverage.*"):
        data = CoverageData(path)
        data.read()
        found |= set(data.lines(WORK) or ())
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    head, second = tmp_path_factory.mktemp("head"), tmp_path_factory.mktemp("second")
    made = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "env_vars": {"RAYTRACE_LOG_DIR": str(head)}},
    )
    made.add_node(num_cpus=1, resources={"second": 1}, env_vars={"RAYTRACE_LOG_DIR": str(second)})
    ray.init(address=made.address)
    yield made
    ray.shutdown()
    made.shutdown()


def test_tasks_generators_and_nodes(cluster: Cluster) -> None:
    classify = ray.remote(work.classify)
    assert ray.get([classify.remote(n) for n in (-1, 0, 1)]) == ["negative", "zero", "positive"]
    squares = ray.remote(work.squares)
    assert [ray.get(ref) for ref in squares.remote(3)] == [0, 1, -2]
    where = ray.remote(resources={"second": 1})(
        lambda x: (work.on_second_node(x), ray.get_runtime_context().get_node_id())
    )
    value, node = ray.get(where.remote(1))
    assert value == 2
    assert node != cluster.head_node.node_id  # not the head: the second node


def test_actors(cluster: Cluster) -> None:
    counter = ray.remote(work.Counter).remote(-5)
    assert ray.get([counter.add.remote(3), counter.add.remote(30)]) == [3, 13]
    asynchronous = ray.remote(work.AsyncCounter).remote()
    assert [ray.get(asynchronous.add.remote(n)) for n in (3, 4)] == [3, 3]
    threaded = ray.remote(max_concurrency=4)(work.Threaded).remote()
    assert sorted(ray.get([threaded.note.remote(n) for n in (1, 1)])) == [0, 1]


def test_killed_actor_keeps_its_lines(cluster: Cluster) -> None:
    doomed = ray.remote(work.Doomed).remote()
    assert ray.get([doomed.touch.remote(2), doomed.touch.remote(0)]) == [4, -1]
    wanted = {work.Doomed.touch.__code__.co_firstlineno + k for k in (1, 2, 3)}
    deadline = time.monotonic() + 60  # saved within a second; generous for a busy machine
    while not wanted <= lines_on_disk() and time.monotonic() < deadline:
        time.sleep(0.1)
    ray.kill(doomed)


def test_task_that_ends_its_worker_keeps_its_lines(cluster: Cluster) -> None:
    ends = ray.remote(max_retries=0)(work.pause_then_exit)
    with pytest.raises(ray.exceptions.WorkerCrashedError):
        ray.get(ends.remote(1.0))
