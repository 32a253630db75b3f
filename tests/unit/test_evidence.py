"""Each finding needs its evidence: the buggy shape is named, the same shape fixed is not.

Runs written as the kit writes them (its encoder, its writer), over two nodes where the
rule joins records across nodes: a report of the files and the report merged from the
nodes' shares must agree. Each pair is a shape that fired without its evidence before
(issue 41: the clean run's worker start-up, an actor busy 0% of the run, first-call
imports, a cache filling up, advice to make an async actor async) and the shape that
does have it.
"""

from __future__ import annotations

from pathlib import Path

import raytrace_kit
from raytrace_kit import Report
from raytrace_kit._output import submissions
from raytrace_kit._reports.cluster import NodeReport, cluster_report
from raytrace_kit._reports.run import Finding
from tests.helpers import KNOWN_START
from tests.unit.test_merge import NODES, _ask, _Process, _task, _without_source

MIB = 2**20
T0 = KNOWN_START


def _reported(root: Path, nodes: int = 2) -> Report:
    """The report of the files, checked against the one merged from the nodes' shares."""
    whole = raytrace_kit.report(root)
    readers = [NodeReport([root / f"node-{node[:12]}"]) for node in NODES[:nodes]]
    merged = cluster_report(_ask(readers, []), nodes, since=None, until=None, source="cluster")
    assert _without_source(merged) == _without_source(whole)
    return whole


def _of(made: Report, kind: str) -> list[Finding]:
    return [finding for finding in made.findings if finding.kind == kind]


class TestMemoryGrows:
    """Growth past the first call, during the calls, still going on: the leak's evidence."""

    def _task_worker(self, root: Path, later_growth: int) -> None:
        """A task worker: its first call imports (+64 MiB), then 8 calls grow it each."""
        worker, rss = _Process(root, 0, 201), 300 * MIB
        for k in range(9):
            grow = 64 * MIB if k == 0 else later_growth
            worker.call(f"{201:010x}{k:06x}", "jobs.score", T0 + k, 0.5, rss=rss, grow=grow)
            rss += grow

    def test_first_call_imports_are_no_leak(self, tmp_path: Path) -> None:
        """+64 MiB in the first call, 64 KiB in each after: the imports, not a leak."""
        self._task_worker(tmp_path, 64 * 2**10)
        assert _of(_reported(tmp_path, nodes=1), "leak") == []

    def test_a_task_worker_that_keeps_growing_gets_a_fix_for_tasks(self, tmp_path: Path) -> None:
        """16 MiB more in each call after the first: named, and told how to see a task's."""
        self._task_worker(tmp_path, 16 * MIB)
        (leak,) = _of(_reported(tmp_path, nodes=1), "leak")
        assert leak.title == f"Memory grows call after call: pid 201 on node {NODES[0][:12]}"
        assert leak.evidence.startswith(
            "RSS rose over 8 calls in a row, by 128 MiB in all (128 MiB during the calls, "
            "after the process's first), in calls of jobs.score"
        )
        assert "@debuggable(profile='memray')" in leak.fix
        assert "profile_scope='actor'" not in leak.fix  # no actor to follow: a task worker

    def _cache(self, root: Path, then_flat: int) -> None:
        """An actor that keeps 12 tiles of 4 MiB, then looks up ``then_flat`` more."""
        actor, actor_id, rss = _Process(root, 0, 301), "c" * 32, 200 * MIB
        actor.call(f"{301:010x}{0:06x}", "jobs.Cache.__init__", T0, 0.1, rss=rss,
                   actor=actor_id, kind="actor_init")  # fmt: skip
        for k in range(1, 13 + then_flat):
            grow = 4 * MIB if k <= 12 else 0  # full: the oldest tile is dropped for each new
            actor.call(f"{301:010x}{k:06x}", "jobs.Cache.lookup", T0 + 0.1 * k, 0.05, rss=rss,
                       grow=grow, actor=actor_id)  # fmt: skip
            rss += grow

    def test_a_cache_that_fills_then_stays_is_no_leak(self, tmp_path: Path) -> None:
        """48 MiB over its first 12 lookups, then 20 more at that size: bounded."""
        self._cache(tmp_path, 20)
        assert _of(_reported(tmp_path, nodes=1), "leak") == []

    def test_an_actor_that_only_grew_is_named(self, tmp_path: Path) -> None:
        """The same 12 lookups and nothing after: nothing says it stops; an actor's fix."""
        self._cache(tmp_path, 0)
        (leak,) = _of(_reported(tmp_path, nodes=1), "leak")
        assert "RSS rose over 12 calls in a row, by 48 MiB" in leak.evidence
        assert "profile_scope='actor'" in leak.fix

    def test_growth_between_calls_is_not_the_calls(self, tmp_path: Path) -> None:
        """RSS up 16 MiB between each two calls, none during one: not the calls' doing."""
        worker, rss = _Process(tmp_path, 0, 202), 300 * MIB
        for k in range(9):
            worker.call(f"{202:010x}{k:06x}", "jobs.idle", T0 + k, 0.5, rss=rss)
            rss += 16 * MIB
        assert _of(_reported(tmp_path, nodes=1), "leak") == []


class TestActorSerializes:
    """Callers that waited on the actor while it ran their calls: the serializing evidence."""

    def _actor(
        self, root: Path, *, made: dict[str, object] | None = None, pid: int = 500
    ) -> tuple[_Process, _Process, str]:
        """The driver (node 0) and an actor (node 1) created at T0, its creation recorded."""
        driver, actor, actor_id = _Process(root, 0, 100), _Process(root, 1, pid), f"{pid:032x}"
        how = made or {"max_concurrency": 1, "async": False}
        prefix = submissions.submit_prefix("jobs.A.__init__", "actor_init", {"CPU": 1.0}, None, how)
        driver.writer.write(submissions.submit_line(
            T0 - 1.0, prefix, _task(pid * 1000), actor_id, None, driver.identity, "main.py:3",
            None,
        ))  # fmt: skip
        actor.call(f"{pid:010x}{0:06x}", "jobs.A.__init__", T0, 0.5, actor=actor_id,
                   kind="actor_init", task=_task(pid * 1000))  # fmt: skip
        return driver, actor, actor_id

    def _queued_together(self, root: Path, made: dict[str, object] | None = None) -> None:
        """Six calls of 0.3 s submitted together once the actor was up: each waited."""
        driver, actor, actor_id = self._actor(root, made=made)
        for k in range(6):
            task = _task(500_001 + k)
            driver.submit(task, "jobs.A.put", T0 + 1.0, "main.py:9", actor=actor_id)
            actor.call(f"{500:010x}{k + 1:06x}", "jobs.A.put", T0 + 1.001 + 0.3 * k, 0.3,
                       actor=actor_id, task=task)  # fmt: skip

    def test_an_actor_busy_all_run_whose_callers_never_waited_is_no_finding(
        self, tmp_path: Path
    ) -> None:
        """An ActorPool's shape: each call submitted as the one before ended, none queued."""
        driver, actor, actor_id = self._actor(tmp_path)
        at = T0 + 0.6
        for k in range(10):
            task = _task(500_001 + k)
            driver.submit(task, "jobs.A.put", at, "main.py:9", actor=actor_id)
            actor.call(f"{500:010x}{k + 1:06x}", "jobs.A.put", at + 0.001, 0.3, actor=actor_id,
                       task=task)  # fmt: skip
            at += 0.301
        made = _reported(tmp_path)
        assert made.overview["calls"] == 11
        assert _of(made, "serializing_actor") == []

    def test_calls_behind_one_waiting_for_its_input_did_not_wait_on_the_actor(
        self, tmp_path: Path
    ) -> None:
        """Busy 0% of the run: its first call waited 5 s for its argument, the rest behind."""
        driver, actor, actor_id = self._actor(tmp_path)
        for k in range(6):
            task = _task(500_001 + k)
            driver.submit(task, "jobs.A.put", T0 + 0.1, "main.py:9", actor=actor_id)
            actor.call(f"{500:010x}{k + 1:06x}", "jobs.A.put", T0 + 5.5 + 0.0011 * k, 0.001,
                       actor=actor_id, task=task)  # fmt: skip
        made = _reported(tmp_path)
        assert _of(made, "serializing_actor") == []
        assert _of(made, "queued") == []  # an actor's queue is judged behind its calls

    def test_calls_that_waited_for_each_other_are_named_with_a_fix_that_fits(
        self, tmp_path: Path
    ) -> None:
        """Six calls queued together: named; the fix is a sync actor's."""
        self._queued_together(tmp_path)
        (serial,) = _of(_reported(tmp_path), "serializing_actor")
        assert "waited for each other in its queue, the longest 1.50 s" in serial.evidence
        assert "let calls that wait on I/O overlap (async methods" in serial.fix

    def test_an_async_actor_is_not_told_to_be_async(self, tmp_path: Path) -> None:
        """Its methods are async already: what blocks its event loop, not "use async"."""
        self._queued_together(tmp_path, {"max_concurrency": 1000, "async": True})
        (serial,) = _of(_reported(tmp_path), "serializing_actor")
        assert serial.fix.startswith("its methods are async, yet its calls never overlapped")
        assert "asyncio.to_thread" in serial.fix
        assert "async methods" not in serial.fix
        assert "max_concurrency" not in serial.fix

    def test_a_threaded_actor_is_told_what_holds_its_threads(self, tmp_path: Path) -> None:
        self._queued_together(tmp_path, {"max_concurrency": 4, "async": False})
        (serial,) = _of(_reported(tmp_path), "serializing_actor")
        assert serial.fix.startswith("it may run 4 calls at once (max_concurrency), yet they")
        assert "async methods" not in serial.fix


class TestQueued:
    """Calls that waited in queue while their worker idled: the queue finding's evidence."""

    def test_a_first_wave_larger_than_the_cpus_is_no_finding(self, tmp_path: Path) -> None:
        """20 calls at once; two workers start 2 s later and run them 0.5 s each."""
        driver = _Process(tmp_path, 0, 100)
        workers = [_Process(tmp_path, 1, 200 + w) for w in range(2)]
        for k in range(20):
            driver.submit(_task(k), "jobs.step", T0, "main.py:5")
            workers[k % 2].call(f"{200 + k % 2:010x}{k:06x}", "jobs.step",
                                T0 + 2.0 + 0.5 * (k // 2), 0.5, task=_task(k))  # fmt: skip
        made = _reported(tmp_path)
        (queued,) = made.queued
        assert queued["p50_s"] > 3.0  # the time in queue is still told, in its table
        assert _of(made, "queued") == []

    def test_a_backlog_on_busy_workers_is_no_finding(self, tmp_path: Path) -> None:
        """Calls of 0.5 s submitted every 0.1 s to a worker already up: it never idled."""
        driver, worker = _Process(tmp_path, 0, 100), _Process(tmp_path, 1, 200)
        worker.call(f"{200:010x}{999:06x}", "jobs.warm", T0, 0.5)
        for k in range(20):
            driver.submit(_task(k), "jobs.step", T0 + 1.0 + 0.1 * k, "main.py:5")
            worker.call(f"{200:010x}{k:06x}", "jobs.step", T0 + 1.0 + 0.5 * k + 0.001, 0.5,
                        task=_task(k))  # fmt: skip
        made = _reported(tmp_path)
        assert {row["function"]: row["p50_s"] > 2.0 for row in made.queued}["jobs.step"]
        assert _of(made, "queued") == []

    def test_calls_that_waited_for_their_inputs_are_no_finding(self, tmp_path: Path) -> None:
        """A pipeline passing refs: each step's worker idled while its input was made."""
        driver, loader, cleaner = (_Process(tmp_path, 0, 100), _Process(tmp_path, 1, 200),
                                   _Process(tmp_path, 1, 201))  # fmt: skip
        prefix = submissions.submit_prefix("jobs.clean", "task", {"CPU": 1.0}, None)
        cleaner.call(f"{201:010x}{999:06x}", "jobs.warm", T0, 0.5)
        for k in range(10):  # each clean(load(k)): load takes 2 s, clean 0.1 s
            loaded, cleaned = _task(100 + k), _task(k)
            driver.submit(loaded, "jobs.load", T0 + 1.0, "main.py:4")
            driver.writer.write(submissions.submit_line(
                T0 + 1.0, prefix, cleaned, None, None, driver.identity, "main.py:5", [loaded]
            ))  # fmt: skip
            begun = T0 + 1.001 + 2.0 * k
            loader.call(f"{200:010x}{k:06x}", "jobs.load", begun, 2.0, task=loaded)
            cleaner.call(f"{201:010x}{k:06x}", "jobs.clean", begun + 2.0, 0.1, task=cleaned)
        made = _reported(tmp_path)
        assert {row["function"]: row["count"] for row in made.queued}["jobs.clean"] == 10
        assert _of(made, "queued") == []

    def test_calls_that_waited_while_their_worker_idled_are_named(self, tmp_path: Path) -> None:
        """Ten calls queued 1.5 s each while the worker that ran them was free: named."""
        driver, worker = _Process(tmp_path, 0, 100), _Process(tmp_path, 1, 200)
        worker.call(f"{200:010x}{999:06x}", "jobs.warm", T0, 0.5)
        for k in range(10):
            driver.submit(_task(k), "jobs.step", T0 + 1.0, "main.py:5")
            worker.call(f"{200:010x}{k:06x}", "jobs.step", T0 + 2.5 + 1.6 * k, 0.1,
                        task=_task(k))  # fmt: skip
        (queued,) = _of(_reported(tmp_path), "queued")
        assert queued.title == "Calls waited in queue while their workers idled: jobs.step"
        assert queued.evidence.startswith(
            "10 calls waited 1.50 s (median; up to 1.50 s) after .remote() while the worker "
            "that then ran each one sat idle, and ran 0.10 s (median)"
        )
        assert "num_cpus, num_gpus" in queued.fix
