"""Unit tier: why each call in flight is not done, and the deadlocks among them (no Ray).

The states are what nodes send (``inflight.in_flight`` and processes' snapshots), built
here by hand: the reasoning is tested on its own, the reading in test_inflight.py.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from raytrace_kit._output import encode
from raytrace_kit._reports.stuck import StuckReport, build

NOW = 1_800_000_000.0
NODE = "a" * 56
_ids = itertools.count(1)


def stamp(ago: float) -> str:
    return encode.stamp(NOW - ago)


def task_id() -> str:
    return f"{next(_ids):016x}" + "f" * 24 + "01000000"


def running(function: str, *, kind: str = "task", actor: str | None = None, ago: float = 10.0,
            task: str | None = None) -> dict[str, Any]:  # fmt: skip
    call_id = f"{next(_ids):016x}"
    return {
        "call_id": call_id, "function": function, "kind": kind, "mode": "ray",
        "task_id": task or task_id(), "actor_id": actor, "node_id": NODE, "pid": 1234,
        "attempt": 0, "started": stamp(ago), "parent_call_id": None, "parent_task_id": None,
    }  # fmt: skip


def submission(function: str, *, kind: str = "task", actor: str | None = None, ago: float = 5.0,
               resources: dict[str, float] | None = None, args: list[str] | None = None,
               task: str | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "task_id": task or task_id(), "function": function, "kind": kind,
        "timestamp": stamp(ago), "actor_id": actor, "parent_call_id": None,
        "parent_task_id": None, "job_id": "01000000", "node_id": NODE, "pid": 99,
        "site": "/app/job.py:7", "resources": {"CPU": 1.0} if resources is None else resources,
        "scheduling": None, "max_concurrency": None, "async": None,
        "arg_task_ids": args or [], **extra,
    }  # fmt: skip


def live(call: dict[str, Any], line: int, waits_on: list[str] | None = None,
         what: str = "ray.get") -> dict[str, Any]:  # fmt: skip
    """A snapshot's entry for a running call: at /app/job.py:line, maybe in ray.get."""
    running_s = NOW - datetime.fromisoformat(call["started"]).timestamp()
    return {
        **call, "running_s": running_s, "thread": "MainThread", "async": False,
        "stack": [["/app/job.py", line, call["function"].rsplit(".", 1)[-1], "ray.get(x)"]],
        "waiting_on": None if waits_on is None
        else {"what": what, "refs": len(waits_on), "task_ids": waits_on},
    }  # fmt: skip


def node(cpus: float = 2.0, free: float = 0.0, **more: float) -> dict[str, Any]:
    return {
        "node_id": NODE, "address": "127.0.0.1", "port": 1, "alive": True,
        "total": {"CPU": cpus, "memory": 8 * 2**30, **more},
        "available": {"CPU": free, "memory": 8 * 2**30},
    }  # fmt: skip


def report(
    calls: list[dict[str, Any]],
    records: list[dict[str, Any]],
    *,
    snapshots: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    actors: dict[str, Any] | None = None,
    durations: dict[str, list[float]] | None = None,
) -> StuckReport:
    state = {
        "node_id": NODE,
        "in_flight": {
            "running": calls, "submissions": records, "actors": actors or {},
            "stuck": [], "durations": durations or {}, "ended": 0, "dead": 0,
        },
        "snapshots": [{"pid": 1234, "is_worker": True, "calls": snapshots or [], "waits": []}],
    }  # fmt: skip
    return build("test", [state], nodes or [node()], now=NOW)


class TestDeadlocks:
    """A cycle of calls waiting on each other is named, call by call, with the fix."""

    def test_two_actors_calling_back_are_a_deadlock_of_three_calls(self) -> None:
        """A.f waits on B.g, B.g on A.h, A.h is queued behind A.f: one cycle, in order."""
        actor_a, actor_b = "1" * 32, "2" * 32
        f = running("app.A.f", kind="actor_method", actor=actor_a, ago=20)
        g = running("app.B.g", kind="actor_method", actor=actor_b, ago=19)
        h = submission("app.A.h", kind="actor_method", actor=actor_a, ago=19, resources={})
        found = report(
            [f, g],
            [h],
            snapshots=[live(f, 9, [g["task_id"]]), live(g, 21, [h["task_id"]])],
        )
        assert len(found.deadlocks) == 1
        cycle = found.deadlocks[0]
        assert [c.function for c in cycle] == ["app.A.f", "app.B.g", "app.A.h"]
        assert [c.where for c in cycle] == ["/app/job.py:9", "/app/job.py:21", "/app/job.py:7"]
        assert "queued behind A.f" in cycle[2].why
        assert "max_concurrency=1" in cycle[2].why
        text = str(found)
        assert "Deadlock 1: 3 calls wait on each other" in text
        assert "Fix: each of these calls waits on the next" in text
        shown = found.to_dict()["deadlocks"][0]["calls"]
        assert [c["where"] for c in shown] == ["/app/job.py:9", "/app/job.py:21", "/app/job.py:7"]

    def test_an_actor_calling_itself_is_a_deadlock(self) -> None:
        """A sync actor's method ray.get-ting another method of its own actor waits forever."""
        actor = "3" * 32
        f = running("app.A.f", kind="actor_method", actor=actor)
        g = submission("app.A.g", kind="actor_method", actor=actor, resources={})
        found = report([f], [g], snapshots=[live(f, 9, [g["task_id"]])])
        assert [[c.function for c in cycle] for cycle in found.deadlocks] == [
            ["app.A.f", "app.A.g"]
        ]

    def test_a_threaded_actor_with_a_free_slot_is_not_a_deadlock(self) -> None:
        """With max_concurrency=2 the callback can run beside the caller: no cycle."""
        actor = "4" * 32
        f = running("app.A.f", kind="actor_method", actor=actor)
        g = submission("app.A.g", kind="actor_method", actor=actor, resources={})
        found = report(
            [f], [g], snapshots=[live(f, 9, [g["task_id"]])],
            actors={actor: {"function": "app.A.__init__", "max_concurrency": 2, "async": False}},
        )  # fmt: skip
        assert found.deadlocks == []

    def test_ray_wait_on_several_refs_is_not_a_deadlock(self) -> None:
        """ray.wait returns when any ref is ready: waiting on a queued call is no cycle."""
        actor = "5" * 32
        f = running("app.A.f", kind="actor_method", actor=actor)
        g = submission("app.A.g", kind="actor_method", actor=actor, resources={})
        other = running("app.other")
        found = report(
            [f, other], [g],
            snapshots=[live(f, 9, [g["task_id"], other["task_id"]], what="ray.wait")],
        )  # fmt: skip
        assert found.deadlocks == []


class TestPendingWhy:
    """Each pending call says why it has not started."""

    def test_infeasible_names_the_request_and_the_largest_node(self) -> None:
        """num_gpus=1 with no GPU anywhere: infeasible, with what it asks and what exists."""
        gpu = submission("app.train", resources={"CPU": 1.0, "GPU": 1.0})
        found = report([], [gpu], nodes=[node(cpus=2, free=2)])
        assert [f.function for f in found.infeasible] == ["app.train"]
        assert found.infeasible[0].why == (
            f"infeasible: asks {{CPU: 1, GPU: 1}}; no node has that, the largest "
            f"(node {NODE[:12]}) has {{CPU: 2, GPU: 0}}"
        )

    def test_more_cpus_than_any_node_is_infeasible(self) -> None:
        """num_cpus beyond every node's total can never run."""
        big = submission("app.big", resources={"CPU": 64.0})
        found = report([], [big], nodes=[node(cpus=2, free=2)])
        assert found.infeasible[0].reason == "infeasible"

    def test_queued_tasks_name_the_calls_holding_the_cpus(self) -> None:
        """20 tasks behind 2 long calls on a 2-CPU node: waiting for CPU, held by those two."""
        holders = [running("app.hold", ago=30), running("app.hold", ago=29)]
        records = [submission("app.hold", task=h["task_id"], ago=30) for h in holders]
        queued = [submission("app.work", ago=5) for _ in range(20)]
        found = report(holders, records + queued, nodes=[node(cpus=2, free=0)])
        assert len(found.pending) == 20
        assert {f.reason for f in found.pending} == {"resources"}
        why = found.pending[0].why
        assert why.startswith("waiting for CPU: held by hold (call ")
        assert all(h["call_id"] in why for h in holders)

    def test_arguments_made_by_a_running_call(self) -> None:
        """A call whose argument is another call's result waits for that call."""
        up = running("app.up", ago=12)
        down = submission("app.down", args=[up["task_id"]])
        found = report([up], [down], nodes=[node(free=1)])
        (pending,) = found.pending
        assert pending.reason == "arguments"
        assert pending.why == f"waiting for its arguments, made by up (call {up['call_id']}) " \
            "(running 12.0 s)"  # fmt: skip

    def test_running_call_waiting_on_its_upstream(self) -> None:
        """A running call in ray.get on a slow call: 'waiting ... on <upstream> (running N s)'."""
        up = running("app.up", ago=12)
        down = running("app.down", ago=3)
        found = report([up, down], [], snapshots=[live(down, 30, [up["task_id"]])])
        waiting = next(f for f in found.running if f.function == "app.down")
        assert waiting.why == f"waiting in ray.get on up (call {up['call_id']}) (running 12.0 s)"


class TestNoFalseAlarm:
    """Healthy work in flight raises nothing."""

    def test_two_hundred_healthy_calls(self) -> None:
        """Running and queued calls, none blocked on another: no deadlock, infeasible, stuck."""
        calls = [running("app.step", ago=0.5) for _ in range(2)]
        records = [submission("app.step", task=c["task_id"]) for c in calls]
        records += [submission("app.step", ago=0.4) for _ in range(198)]
        found = report(calls, records, nodes=[node(cpus=2, free=0)])
        assert len(found.flights) == 200
        assert (found.deadlocks, found.infeasible, found.stuck) == ([], [], [])
        assert "no deadlock, nothing infeasible, nothing stuck" in str(found)


class TestStragglers:
    """A running call far beyond its function's usual duration is a straggler."""

    def test_five_times_the_median_and_a_second_over(self) -> None:
        """Usual 0.5 s, running 10 s: named; usual 0.5 s, running 2 s: not."""
        slow, fine = running("app.step", ago=10), running("app.step", ago=2)
        found = report([slow, fine], [], durations={"app.step": [0.5] * 20})
        assert [f.call_id for f in found.stragglers] == [slow["call_id"]]

    def test_no_history_no_straggler(self) -> None:
        """Fewer than five finished calls to compare with: nothing is named."""
        found = report([running("app.step", ago=100)], [], durations={"app.step": [0.1] * 3})
        assert found.stragglers == []


class TestWhereARunningCallIs:
    """The user's own line, and what it is blocked in when its frames say so."""

    def _why(self, stack: list[list[Any]]) -> tuple[str | None, str]:
        call = running("app.f")
        (flight,) = report([call], [], snapshots=[{**live(call, 1), "stack": stack}]).flights
        return flight.where, flight.why

    def test_a_blocking_call_into_c_on_the_users_line(self) -> None:
        where, why = self._why([["/app/job.py", 12, "f", "time.sleep(40)"]])
        assert (where, why) == ("/app/job.py:12", "blocked in sleep() at /app/job.py:12")

    def test_the_standard_librarys_frame_is_not_where_but_what(self) -> None:
        stdlib = __import__("threading").__file__
        where, why = self._why([
            ["/app/job.py", 7, "f", "event.wait()"], [stdlib, 327, "wait", "waiter.acquire()"],
        ])  # fmt: skip
        assert where == "/app/job.py:7"
        assert why == "blocked in wait() in threading.py:327 at /app/job.py:7"

    def test_a_line_that_computes_is_running(self) -> None:
        assert self._why([["/app/job.py", 9, "f", "total += x * x"]])[1] == (
            "running at /app/job.py:9"
        )
