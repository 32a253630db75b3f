"""Integration: "why is it stuck?" on real Ray: stuck(), `raytrace-kit stuck`, call.stuck.

Calls are held with barriers (a file the test creates when it is done looking), never
with sleeps the test races against; every wait polls for a condition under a generous
deadline (``helpers.wait_until``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers

pytestmark = pytest.mark.usefixtures("ray_session")

HERE = Path(__file__)


def line_of(marker: str) -> int:
    """The line of this file that carries ``marker`` (a comment on the line)."""
    return helpers.marked_line(HERE, marker)


def source_of(marker: str) -> str:
    """That line's text, as a stack shows it (stripped)."""
    return HERE.read_text().splitlines()[line_of(marker) - 1].strip()


def hold_until(release: str) -> None:
    while not os.path.exists(release):  # holds its CPU: a busy wait, not a ray.get
        time.sleep(0.02)


@pytest.fixture
def release(tmp_path: Path) -> Iterator[str]:
    """A barrier: calls wait until this file exists; the test creates it when it is done."""
    path = tmp_path / "release"
    yield str(path)
    path.touch()


@debuggable
@ray.remote(num_cpus=0)
class Caller:
    def remember(self, me: Any) -> None:
        self.me = me

    def f(self, other: Any) -> int:
        return ray.get(other.g.remote(self.me))  # Caller.f waits

    def h(self) -> int:
        return 1


@debuggable
@ray.remote(num_cpus=0)
class Callee:
    def g(self, caller: Any) -> int:
        return ray.get(caller.h.remote())  # Callee.g waits


def test_two_actors_calling_back_are_named_a_deadlock_from_another_process() -> None:
    """A.f ray.gets B.g, B.g ray.gets A.h: `raytrace-kit stuck --json` names the cycle."""
    a, b = Caller.remote(), Callee.remote()
    ray.get(a.remember.remote(a))
    a.f.remote(b)
    helpers.wait_until(
        lambda: (
            helpers.events_of(Caller, "call.submit")
            and any(e["function"].endswith(".h") for e in helpers.events_of(Caller, "call.submit"))
        ),
        "Callee.g submitted Caller.h",
    )
    address = ray.get_runtime_context().gcs_address
    done = helpers.run_cli("stuck", "--address", address, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    (deadlock,) = found["deadlocks"]
    calls = deadlock["calls"]
    assert [c["function"].rsplit(".", 2)[-2:] for c in calls] == [
        ["Caller", "f"], ["Callee", "g"], ["Caller", "h"],
    ]  # fmt: skip
    assert [c["state"] for c in calls] == ["running", "running", "pending"]
    assert [c["where"] for c in calls] == [
        f"{HERE}:{line_of('Caller.f waits')}",
        f"{HERE}:{line_of('Callee.g waits')}",
        f"{HERE}:{line_of('Callee.g waits')}",  # where Caller.h was submitted
    ]
    assert calls[2]["why"].startswith("queued behind Caller.f (call ")
    assert "max_concurrency=1" in calls[2]["why"]
    assert "make its methods async" in deadlock["fix"]
    text = helpers.run_cli("stuck", "--address", address)
    assert "Deadlock 1: 3 calls wait on each other" in text.stdout
    assert "return ray.get(other.g.remote(self.me))" in text.stdout  # the stack, its line
    ray.kill(a)
    ray.kill(b)


@debuggable
@ray.remote(num_gpus=1)
def needs_a_gpu() -> int:
    return 1


@debuggable
@ray.remote
def needs_cpus() -> int:
    return 1


def test_infeasible_calls_name_their_request_and_the_largest_node() -> None:
    """num_gpus=1 or num_cpus=64 on a 2-CPU node: infeasible, with both sides named."""
    refs = [needs_a_gpu.remote(), needs_cpus.options(num_cpus=64).remote()]
    found = raytrace_kit.stuck()
    node = ray.get_runtime_context().get_node_id()[:12]
    why = {f.function.rsplit(".", 1)[-1]: f.why for f in found.infeasible}
    assert why == {
        "needs_a_gpu": f"infeasible: asks {{CPU: 1, GPU: 1}}; no node has that, the largest "
        f"(node {node}) has {{CPU: 2, GPU: 0}}",
        "needs_cpus": f"infeasible: asks {{CPU: 64}}; no node has that, the largest "
        f"(node {node}) has {{CPU: 2, GPU: 0}}",
    }
    for ref in refs:
        ray.cancel(ref)


def test_alike_calls_are_one_entry_with_their_count() -> None:
    """Nineteen calls asking for a GPU: one entry, counted, in text, HTML and JSON.

    They printed as nineteen identical blocks; a different call stays apart.
    """
    refs = [needs_a_gpu.remote() for _ in range(19)]
    refs.append(needs_cpus.options(num_cpus=64).remote())
    try:
        found = raytrace_kit.stuck()
        text, page, data = str(found), found._repr_html_(), found.to_dict()
    finally:
        for ref in refs:
            ray.cancel(ref)
    section = text.split("Calls no node can run (infeasible)\n", 1)[1].split("\n\n", 1)[0]
    lines = [line for line in section.splitlines() if not line.startswith("     ")]
    assert len(lines) == 2, section  # one line per kind of call, not one per call
    assert lines[0].startswith("19 calls like needs_a_gpu (task ")
    assert lines[1].startswith("needs_cpus (task ")
    assert section.count("asks {CPU: 1, GPU: 1}") == 1
    assert "19 calls like needs_a_gpu" in page
    assert page.count("asks {CPU: 1, GPU: 1}") <= 3  # its section, pending by why, a row
    assert "and 18 more like it" in page  # the table: one row for them (text wraps it)
    counted = {
        g["example"]["function"].rsplit(".", 1)[-1]: g["count"]
        for g in data["grouped"]["infeasible"]
    }
    assert counted == {"needs_a_gpu": 19, "needs_cpus": 1}
    assert len(data["infeasible"]) == 20  # every call is still listed


@debuggable
@ray.remote(max_retries=0)
def hold(release: str) -> int:
    hold_until(release)
    return 1


@debuggable
@ray.remote
def queued(x: int) -> int:
    return x


def test_queued_tasks_name_the_calls_that_hold_the_cpus(release: str) -> None:
    """20 tasks behind 2 long calls on a 2-CPU cluster wait for CPU held by those two."""
    holders = [hold.remote(release) for _ in range(2)]
    started = helpers.wait_until(
        lambda: len(starts := helpers.events_of(hold, "call.start")) == 2 and starts,
        "both holders started",
    )
    refs = [queued.remote(i) for i in range(20)]

    def all_twenty() -> list[Any]:  # Ray's state API hears of new tasks a moment later
        found = raytrace_kit.stuck()
        waiting = [f for f in found.pending if f.function.endswith(".queued")]
        return waiting if len(waiting) == 20 else []

    waiting = helpers.wait_until(all_twenty, "the 20 queued tasks listed")
    assert {f.reason for f in waiting} == {"resources"}
    why = waiting[0].why
    assert why.startswith("waiting for CPU: held by hold (call ")
    assert {e["call_id"] for e in started} == set(re.findall(r"call ([0-9a-f]{16})", why))
    Path(release).touch()
    assert ray.get(refs) == list(range(20))
    assert ray.get(holders) == [1, 1]


@debuggable
@ray.remote(num_cpus=0, max_retries=0)
def upstream(release: str) -> int:
    hold_until(release)
    return 7


@debuggable
@ray.remote(num_cpus=0)
def downstream(refs: list[Any]) -> int:
    return ray.get(refs[0])  # downstream waits


def test_a_call_waiting_on_a_slow_upstream_names_it(release: str) -> None:
    """A call blocked in ray.get on a running call: 'waiting ... on upstream (running N s)'."""
    up = upstream.remote(release)
    down = downstream.remote([up])
    helpers.wait_until(lambda: helpers.events_of(downstream, "call.start"), "downstream started")
    up_call = helpers.wait_until(lambda: helpers.events_of(upstream, "call.start"), "upstream")[0]
    found = raytrace_kit.stuck()
    (flight,) = [f for f in found.running if f.function.endswith(".downstream")]
    assert re.fullmatch(
        rf"waiting in ray\.get on upstream \(call {up_call['call_id']}\) \(running [0-9.]+ s\)",
        flight.why,
    ), flight.why
    assert flight.where == f"{HERE}:{line_of('downstream waits')}"
    Path(release).touch()
    assert ray.get(down) == 7


def test_two_hundred_healthy_calls_raise_no_alarm(release: str) -> None:
    """Calls running and queued for CPUs, none blocked on another: nothing is flagged."""
    refs = [hold.remote(release) for _ in range(200)]
    helpers.wait_until(lambda: len(helpers.events_of(hold, "call.start")) == 2, "two running")

    def all_listed() -> Any:  # Ray's state API hears of new tasks a moment later
        found = raytrace_kit.stuck()
        flights = [f for f in found.flights if f.function.endswith(".hold")]
        return found if len(flights) == 200 else None

    found = helpers.wait_until(all_listed, "the 200 calls listed")
    assert (found.deadlocks, found.infeasible, found.stuck) == ([], [], [])
    Path(release).touch()
    assert sum(ray.get(refs)) == 200


@debuggable
@ray.remote(num_cpus=0)
class Waiter:
    async def wait_on(self, refs: list[Any]) -> int:
        return await refs[0]  # Waiter.wait_on awaits


@debuggable
@ray.remote(num_cpus=0, max_concurrency=2)
class TwoAtATime:
    def work(self, release: str) -> int:
        hold_until(release)
        return 1


def test_async_and_threaded_actors(release: str) -> None:
    """An async call awaiting a ref names its producer; a threaded actor's queue its limit."""
    up = upstream.remote(release)
    waiter = Waiter.remote()
    waited = waiter.wait_on.remote([up])
    pool = TwoAtATime.remote()
    work = [pool.work.remote(release) for _ in range(3)]
    helpers.wait_until(lambda: helpers.events_of(Waiter, "call.start"), "the async call")
    helpers.wait_until(
        lambda: len([e for e in helpers.events_of(TwoAtATime, "call.start")
                     if e["function"].endswith(".work")]) == 2,
        "two calls of the threaded actor",
    )  # fmt: skip
    up_call = helpers.events_of(upstream, "call.start")[0]
    found = raytrace_kit.stuck()
    (awaiting,) = [f for f in found.running if f.function.endswith(".wait_on")]
    assert awaiting.waiting_in == "await"
    assert awaiting.waiting_on == [up_call["task_id"]]
    assert awaiting.where == f"{HERE}:{line_of('Waiter.wait_on awaits')}"
    (third,) = [f for f in found.pending if f.function.endswith(".work")]
    assert third.reason == "actor_busy"
    assert "max_concurrency=2" in third.why
    Path(release).touch()
    assert ray.get(waited) == 7
    assert ray.get(work) == [1, 1, 1]


@debuggable(stuck_after=0.5)
@ray.remote(num_cpus=0, max_retries=0)
def sleeps() -> None:
    time.sleep(3600)  # sleeps blocks


@debuggable(stuck_after=0.5)
@ray.remote(num_cpus=0, max_retries=0)
def locks() -> None:
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # locks blocks


@debuggable(stuck_after=0.5)
@ray.remote(num_cpus=0, max_retries=0)
def gets(release: str) -> int:
    return ray.get(upstream.remote(release))  # gets blocks


@pytest.mark.parametrize(
    ("function", "marker", "source"),
    [
        (sleeps, "sleeps blocks", "time.sleep(3600)"),
        (locks, "locks blocks", "lock.acquire()"),
        (gets, "gets blocks", "return ray.get(upstream.remote(release))"),
    ],
    ids=["time.sleep", "lock.acquire", "ray.get"],
)
def test_a_stuck_call_leaves_its_stack_which_the_report_keeps_after_kill_9(
    function: Any, marker: str, source: str, release: str
) -> None:
    """Past stuck_after: call.stuck names the blocking line; kill -9, and the report shows it."""
    args = (release,) if function is gets else ()
    ref = function.remote(*args)
    (event,) = helpers.wait_until(lambda: helpers.events_of(function, "call.stuck")[:1], marker)
    name = function.__qualname__
    assert event["stack"][-1] == [str(HERE), line_of(marker), name, source_of(marker)]
    assert event["running_s"] >= event["stuck_after_s"] == 0.5
    if function is gets:  # the call it waits on: the one it submitted (recorded before)
        (up,) = helpers.events_of(upstream, "call.submit")
        assert event["waiting_on"] == {"what": "ray.get", "refs": 1, "task_ids": [up["task_id"]]}
    os.kill(event["pid"], signal.SIGKILL)
    with pytest.raises(ray.exceptions.RayError):
        ray.get(ref)
    source_dir = str(raytrace_kit.log_dir())
    done = helpers.run_cli("report", source_dir, "--json")
    assert done.returncode == 0, done.stderr
    (stuck,) = [s for s in json.loads(done.stdout)["stuck"] if s["call_id"] == event["call_id"]]
    assert stuck["where"] == f"{HERE}:{line_of(marker)}"
    assert stuck["outcome"] == "its process died"
    text = helpers.run_cli("report", source_dir).stdout
    assert f"{name} (call {event['call_id']}), its stack when last reported:" in text
    assert source in text
