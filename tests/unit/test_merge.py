"""A cluster's report merged from its nodes' shares equals the report of all their files.

One run is written over three node directories as the kit writes it (its encoder), with
what crosses nodes: calls submitted on one node and run on another, a task that failed
on one node and succeeded on its retry on another, a parent whose children ran one at a
time on two nodes, the driver waiting on calls of every node, a call without an end.
Each directory is read by its own :class:`NodeReport` (as each node's reader would), the
answers are merged, and the report must be the one of the directories read together.
"""

from __future__ import annotations

import json
import pickle
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import raytrace_kit
from raytrace_kit._output import encode, paths, submissions
from raytrace_kit._output.samples import SamplesFile
from raytrace_kit._output.writer import EventWriter
from raytrace_kit._process import ProcessIdentity
from raytrace_kit._reports.cluster import NodeReport, cluster_report
from raytrace_kit._reports.run import pack_floats, pack_ints, unpack_floats, unpack_ints
from tests.helpers import KNOWN_START

NODES = ["1a" * 28, "2b" * 28, "3c" * 28]
MIB = 2**20


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="microseconds")


def _stamped(line: bytes, at: float) -> bytes:
    return line[:14] + _stamp(at).encode() + line[46:]


class _Process:
    """One process's event file on one node, lines written with the kit's encoder."""

    def __init__(self, root: Path, node: int, pid: int) -> None:
        node_id = NODES[node]
        self.identity = ProcessIdentity("01000000", node_id, f"{pid:056x}", pid, is_worker=True)
        directory = root / f"node-{node_id[:12]}"
        directory.mkdir(parents=True, exist_ok=True)
        self.writer = EventWriter(directory / paths.event_file_name(node_id, pid))

    def call(
        self,
        call_id: str,
        function: str,
        at: float,
        seconds: float | None,
        *,
        task: str | None = None,
        attempt: int = 0,
        parent: str | None = None,
        error: BaseException | None = None,
        rss: int = 100 * MIB,
        grow: int = 0,
        actor: str | None = None,
        stuck: float | None = None,
        kind: str | None = None,
    ) -> None:
        kind = kind or ("actor_method" if actor else "task")
        members = encode.call_members(
            call_id=call_id,
            spec_fragment=encode.members({"function": function, "kind": kind}),
            mode="ray",
            task_id=task or call_id.ljust(48, "f"),
            actor_id=actor,
            identity=self.identity,
            attempt=attempt,
            parent=f"{parent}/{parent.ljust(48, 'e')}" if parent else None,
        )
        start = encode.call_line("call.start", "info", members, encode.memory_members((rss,) * 3))
        self.writer.write(_stamped(start, at))
        if stuck is not None:  # it ran past its stuck_after: where it was then
            frame = ("/app/jobs.py", 40, "hang", "lock.acquire()")
            tail = encode.stuck_members(stuck, 60.0, 1, "MainThread", [frame], None)
            self.writer.write(
                _stamped(encode.call_line("call.stuck", "warning", members, tail), at + stuck)
            )
        if seconds is None:
            return  # its process died during it
        figures = (rss + grow, rss // 2, rss + grow)
        tail = encode.end_members(seconds, error, None, rss_start=rss, figures=figures)
        level = "info" if error is None else "error"
        end = encode.call_line("call.end", level, members, tail)
        self.writer.write(_stamped(end, at + seconds))

    def submit(
        self, task: str, function: str, at: float, site: str, actor: str | None = None
    ) -> None:
        kind = "actor_method" if actor else "task"
        prefix = submissions.submit_prefix(function, kind, {"CPU": 1.0}, None)
        line = submissions.submit_line(at, prefix, task, actor, None, self.identity, site, None)
        self.writer.write(line)


def _task(number: int) -> str:
    return f"{number:016x}".ljust(48, "f")


def _write_run(root: Path) -> None:  # noqa: PLR0912 -- one scenario
    t0 = KNOWN_START
    driver = _Process(root, 0, 100)
    workers = [_Process(root, node, 200 + node) for node in range(3)]
    more = [_Process(root, node, 300 + node) for node in range(3)]
    # The driver submits 60 calls of jobs.work, run on every node; 4 never start.
    for i in range(64):
        driver.submit(_task(i), "jobs.work", t0 + 0.01 * i, "main.py:12")
    for i in range(60):
        node = i % 3
        took = 0.05 + 0.001 * (i % 7)
        if i == 59:
            took = 4.0  # a straggler, on node 2
        workers[node].call(f"{i + 1:016x}", "jobs.work", t0 + 0.5 + 0.02 * i, took, task=_task(i))
    # A task that fails on node 1 and succeeds on its retry on node 2.
    workers[1].call("00000000000a0001", "jobs.flaky", t0 + 3, 0.1, task=_task(900),
                    error=ValueError("flaky input"))  # fmt: skip
    workers[2].call("00000000000a0002", "jobs.flaky", t0 + 3.5, 0.1, task=_task(900), attempt=1)
    # The same error on two nodes: one group of failures.
    for node in (1, 2):
        for k in range(2):
            more[node].call(f"00000000000b{node}{k:03x}", "jobs.parse", t0 + 4 + node + k, 0.2,
                            error=KeyError("row"))  # fmt: skip
    # A parent on node 0 whose children ran one after the other on nodes 1 and 2.
    more[0].call("00000000000c0000", "jobs.fan_out", t0 + 10, 2.0)
    for k in range(6):
        more[1 + k % 2].call(f"00000000000c{k + 1:04x}", "jobs.step", t0 + 10.05 + 0.3 * k, 0.25,
                             parent="00000000000c0000")  # fmt: skip
    # A leak on node 1: RSS up 16 MiB a call, eight calls in a row.
    for k in range(8):
        more[1].call(f"00000000000d{k:04x}", "jobs.hold", t0 + 20 + k, 0.1,
                     rss=(200 + 16 * k) * MIB, grow=16 * MIB)  # fmt: skip
    # A call without an end on node 2 (its process, long gone, died during it).
    more[2].call("00000000000e0000", "jobs.crash", t0 + 30, None)
    # A call that reported itself stuck, then ended, on node 1.
    more[1].call("00000000000f0000", "jobs.hang", t0 + 31, 70.0, stuck=61.0)
    # One actor on node 2 running its calls back to back while little else runs: the
    # driver submitted them all at once, so they waited for each other in its queue.
    actor = _Process(root, 2, 400)
    for k in range(70):
        task = _task(2000 + k)
        driver.submit(task, "jobs.Store.put", t0 + 109, "main.py:40", actor="a1" * 16)
        actor.call(f"0000000000a1{k:04x}", "jobs.Store.put", t0 + 110 + 2 * k, 2.0,
                   actor="a1" * 16, task=task)  # fmt: skip
    # A ray.get in a loop in the driver (main.py:30): each call submitted after the one
    # before ended, on nodes 1 and 2; one failed on node 1 and ran again on node 2, one
    # ran on the driver's own node, failed there, and ran again on node 1: both retries
    # ended after the next call was submitted (their tasks' last ends count).
    at = t0 + 260
    for k in range(8):
        task = _task(3000 + k)
        driver.submit(task, "jobs.step2", at, "main.py:30")
        if k == 3:
            workers[1].call(f"00000000003{k:05x}", "jobs.step2", at + 0.01, 0.1, task=task,
                            error=OSError("flaky disk"))  # fmt: skip
            workers[2].call(f"00000000004{k:05x}", "jobs.step2", at + 0.2, 0.3, task=task,
                            attempt=1)  # fmt: skip
            at += 0.4
        elif k == 5:
            more[0].call(f"00000000003{k:05x}", "jobs.step2", at + 0.01, 0.1, task=task,
                         error=OSError("flaky disk"))  # fmt: skip
            workers[1].call(f"00000000004{k:05x}", "jobs.step2", at + 0.2, 0.3, task=task,
                            attempt=1)  # fmt: skip
            at += 0.4
        else:
            workers[1 + k % 2].call(f"00000000003{k:05x}", "jobs.step2", at + 0.01, 0.1, task=task)
            at += 0.2
    # Forty more short-lived processes, a call each: more lanes than a picture draws.
    for k in range(40):
        _Process(root, k % 3, 1000 + k).call(
            f"0000000000b2{k:04x}", "jobs.tiny", t0 + 50 + k, 0.001
        )
    # The driver's own record (node 0): a long wait on every jobs.work call.
    record = root / f"node-{NODES[0][:12]}" / f"driver-{NODES[0][:12]}-100.jsonl"
    lines = [
        {"timestamp": _stamp(t0), "event": "run.start", "script": "main.py", "pid": 100},
        {"timestamp": _stamp(t0 + 6), "event": "driver.get", "started": _stamp(t0 + 0.6),
         "blocked_s": 5.4, "file": "/app/main.py", "line": 14, "function": "main",
         "refs": 60, "submitted": 64, "task_ids": [_task(i) for i in range(60)]},
    ]  # fmt: skip
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _ask(readers: list[NodeReport], moved: list[int]) -> Any:
    def ask(method: str, arguments: list[tuple[Any, ...]]) -> list[Any]:
        answers = [getattr(r, method)(*a) for r, a in zip(readers, arguments, strict=True)]
        moved.extend(len(pickle.dumps(answer)) for answer in answers)
        return answers

    return ask


def _without_source(report: raytrace_kit.Report) -> dict[str, Any]:
    data = report.to_dict()
    data["overview"].pop("source")
    return data


class TestMergedReport:
    """report(address=) merges what each node computed: the report of all the files."""

    def test_equals_the_report_of_all_the_files(self, tmp_path: Path) -> None:
        _write_run(tmp_path)
        whole = raytrace_kit.report(tmp_path)
        readers = [NodeReport([tmp_path / f"node-{n[:12]}"]) for n in NODES]
        moved: list[int] = []
        merged = cluster_report(_ask(readers, moved), 3, since=None, until=None, source="cluster")
        assert _without_source(merged) == _without_source(whole)
        # What the scenario put across nodes is there, found the same way.
        titles = [f.title for f in merged.findings]
        assert "A straggler: jobs.work" in titles
        assert "Calls submitted and waited on one at a time by jobs.fan_out" in titles
        assert "The driver waited on a straggler: jobs.work" in titles
        assert any(t.startswith("Memory grows call after call: pid 301") for t in titles)
        # Seven failed calls; retries on other nodes saved jobs.flaky's and jobs.step2's.
        assert (merged.overview["failed"], merged.overview["failed_tasks"]) == (7, 4)
        assert [(f["function"], f["count"], len(f["nodes"])) for f in merged.failures] == [
            ("jobs.parse", 4, 2), ("jobs.step2", 2, 2), ("jobs.flaky", 1, 1),
        ]  # fmt: skip
        assert [n["task_id"] for n in merged.never_started] == [_task(i) for i in range(60, 64)]
        assert {row["function"]: row["count"] for row in merged.queued}["jobs.work"] == 60
        assert merged.stuck[0]["where"] == "/app/jobs.py:40"
        assert merged.charts["lanes_not_drawn"] > 0
        assert "One actor serializes the work: jobs.Store (a1a1a1a1a1a1)" in titles
        (store,) = [f for f in merged.findings if f.title.startswith("One actor serializes")]
        # The last call waited 139 s in all, 138 s of it behind the others while they ran:
        # the actor idled the second before its first call began.
        assert "waited for each other in its queue, the longest 138.00 s" in store.evidence
        (loop,) = [f for f in merged.findings if f.kind == "driver_loop"]
        assert loop.title == (
            "ray.get in a loop in the driver: main.py:30 waited on 8 calls of jobs.step2 "
            "one at a time"
        )
        assert loop.evidence.startswith("5 of the 8 calls submitted at main.py:30")

    def test_a_window_merges_the_same(self, tmp_path: Path) -> None:
        _write_run(tmp_path)
        since, until = _stamp(KNOWN_START + 3), _stamp(KNOWN_START + 25)
        whole = raytrace_kit.report(tmp_path, since=since, until=until)
        readers = [NodeReport([tmp_path / f"node-{n[:12]}"]) for n in NODES]
        merged = cluster_report(_ask(readers, []), 3, since=since, until=until, source="c")
        assert _without_source(merged) == _without_source(whole)
        assert merged.overview["calls"] == whole.overview["calls"] < 80

    def test_samples_on_the_nodes_merge_the_same(self, tmp_path: Path) -> None:
        """Sampled processes on two nodes: the hot line, the straggler's lines, the flame."""
        _write_run(tmp_path)
        _write_samples(tmp_path)
        whole = raytrace_kit.report(tmp_path)
        readers = [NodeReport([tmp_path / f"node-{n[:12]}"]) for n in NODES]
        merged = cluster_report(_ask(readers, []), 3, since=None, until=None, source="c")
        assert _without_source(merged) == _without_source(whole)
        (work,) = [row for row in merged.slowest if row["function"] == "jobs.work"]
        assert work["hot_line"] == "89% of work's running samples at test_merge.py:41"
        (straggler,) = [f for f in merged.findings if f.kind == "straggler"]
        assert "test_merge.py:41" in straggler.evidence
        flame = merged.charts["flame"]  # the samples of both nodes, under jobs.work
        ((name, seconds),) = [(child["name"], child["s"]) for child in flame["children"]]
        assert (name, seconds) == ("jobs.work", pytest.approx(3.95))


def _crunch() -> None:  # the sampled code: its frames name this file
    pass


def _write_samples(root: Path) -> None:
    """The straggler (node 2) sampled at two lines, another call (node 0) at a third."""
    code = _crunch.__code__
    for node, pid, call, counts in (
        (2, 202, f"{60:016x}", ((41, 350), (42, 40))),
        (0, 200, f"{1:016x}", ((43, 5),)),
    ):
        directory = root / f"node-{NODES[node][:12]}"
        out = SamplesFile(directory / f"samples-{NODES[node][:12]}-{pid}.jsonl",
                          {"pid": pid, "node_id": NODES[node], "hz": 100.0})  # fmt: skip
        thread = out.thread(1, "MainThread")
        made = out.call(call, {"call_id": call, "function": "jobs.work", "actor_id": None})
        for line, count in counts:
            out.counts[out.stack((out.frame(code, line),)), thread, made, 0] += count
        assert out.flush()
        out.close()


def _write_actors(root: Path) -> None:
    """Three new actors, each created while the driver's first call to it waits.

    X (on the driver's node) and Y (on another) take their calls from a ray.get loop in
    the driver: the first waited for the actor's creation, one of Y's for Ray to deliver
    it, none for another call. Z's six
    calls were submitted together after it was up: each waited for those before it.
    """
    t0 = KNOWN_START
    driver = _Process(root, 0, 100)
    for name, node, pid in (("x", 0, 500), ("y", 1, 501)):
        actor, actor_id = _Process(root, node, pid), (name * 32)[:32]
        actor.call(f"00000000{pid:04x}0000", f"jobs.{name.upper()}.__init__", t0 + 0.5, 0.5,
                   actor=actor_id, kind="actor_init", task=_task(pid))  # fmt: skip
        at = t0 + 0.01
        for k in range(6):
            task = _task(pid * 100 + k)
            driver.submit(task, f"jobs.{name.upper()}.get", at, f"main.py:{pid}", actor=actor_id)
            # Y's third call was slow to be delivered (a busy machine): still no call before it.
            begun = max(at, t0 + 1.0) + (0.5 if name == "y" and k == 2 else 0.001)
            actor.call(f"00000000{pid:04x}{k + 1:04x}", f"jobs.{name.upper()}.get", begun, 0.02,
                       actor=actor_id, task=task)  # fmt: skip
            at = begun + 0.021
    z, z_id = _Process(root, 1, 502), "z" * 32
    z.call("000000000502ffff", "jobs.Z.__init__", t0 + 0.5, 0.5, actor=z_id, kind="actor_init")
    for k in range(6):
        task = _task(50200 + k)
        driver.submit(task, "jobs.Z.put", t0 + 2.0, "main.py:502", actor=z_id)
        z.call(f"0000000005020{k:03x}", "jobs.Z.put", t0 + 2.001 + 0.3 * k, 0.3,
               actor=z_id, task=task)  # fmt: skip


class TestActorCreation:
    """Waiting for an actor to be created is not waiting behind its other calls."""

    def test_only_the_actor_whose_calls_waited_for_each_other_is_named(
        self, tmp_path: Path
    ) -> None:
        _write_actors(tmp_path)
        whole = raytrace_kit.report(tmp_path)
        serial = [f for f in whole.findings if f.kind == "serializing_actor"]
        assert [f.subject for f in serial] == ["jobs.Z"]
        # Its sixth call waited for the five before it, 1.5 s: not for the creation.
        assert "waited for each other in its queue, the longest 1.50 s" in serial[0].evidence
        # The time in queue still counts the creation: the calls did wait that long.
        queued = {row["function"]: row["max_s"] for row in whole.queued}
        assert queued["jobs.X.get"] > 0.99
        assert queued["jobs.Y.get"] > 0.99
        # Merged from the nodes' shares (X's calls join on the driver's node, Y's and Z's
        # across nodes), the report is the same.
        readers = [NodeReport([tmp_path / f"node-{n[:12]}"]) for n in NODES[:2]]
        merged = cluster_report(_ask(readers, []), 2, since=None, until=None, source="cluster")
        assert _without_source(merged) == _without_source(whole)


class TestPacking:
    """Numbers travel packed and come back bit for bit."""

    @pytest.mark.parametrize(
        "values",
        [
            [0.000001, 0.25, 1.5, 0.123456, 3600.0, 0.0],  # the kit's durations: microseconds
            [1.7e9 + i / 7 for i in range(50)],  # epoch seconds as floats
            [0.1 / 3, 2.0**-40, 1e300, -5.5],  # anything else: raw
        ],
    )
    def test_floats_come_back_exactly(self, values: list[float]) -> None:
        assert list(unpack_floats(pack_floats(values))) == sorted(values)
        assert list(unpack_floats(pack_floats(values, keep_order=True))) == values

    def test_integers_keep_their_order(self) -> None:
        values = [5, -3, 2**63, 0, 7]
        assert unpack_ints(pack_ints(values)) == values

    def test_durations_cost_about_a_byte_each(self) -> None:
        values = [round(0.01 + (i * 7919 % 1000) / 1e5, 6) for i in range(10_000)]
        assert len(pack_floats(values)) < len(values)
