"""report() on runs written by the kit's own renderer and writer: its findings, its work."""

from __future__ import annotations

import gc
import math
import re
import time
from pathlib import Path

import pytest

import raytrace_kit
from raytrace_kit._output import submissions
from raytrace_kit._reports.reading import header, open_session
from raytrace_kit._reports.run import FORCE_CANCELLED
from tests.helpers import KNOWN_START, MANY_PARENTS_ROUND, EventFile, write_many_parents
from tests.otel_runs import ORIGIN, Process, task_of
from tests.unit.test_otel_export import dead_pid


class TestStraggler:
    """A function's slowest call, far slower than its median: named with its arguments."""

    def test_its_arguments_come_from_its_start_as_it_went_by(self, tmp_path: Path) -> None:
        """The straggler's recorded arguments are shown; no other call's are."""
        events = EventFile(tmp_path, 1001)
        for index in range(8):
            call, took = f"{1001:010x}{index:06x}", 3.0 if index == 5 else 0.2
            begun = KNOWN_START + index * 4
            events.start(call, "jobs.fetch", args=(index * 10,), at=begun)
            events.end(call, seconds=took, at=begun + took)
        events.close()
        (finding,) = [f for f in raytrace_kit.report(tmp_path).findings if f.kind == "straggler"]
        assert "arguments ['50'] {}" in finding.evidence


class TestSlowestShare:
    """The slowest functions' share: of all calls' time, so never over 100%."""

    def test_calls_side_by_side_share_all_calls_time(self, tmp_path: Path) -> None:
        """8 processes busy all along: 3 s of jobs.load and 1 s of jobs.save each, 75%/25%."""
        for pid in range(2001, 2009):
            events = EventFile(tmp_path, pid)
            for index, (function, took) in enumerate((("jobs.load", 3.0), ("jobs.save", 1.0))):
                call = f"{pid:010x}{index:06x}"
                begun = KNOWN_START + (3.0 if index else 0.0)
                events.start(call, function, at=begun)
                events.end(call, seconds=took, at=begun + took)
            events.close()
        made = raytrace_kit.report(tmp_path)
        shares = {row["function"]: row["share"] for row in made.slowest}
        assert shares == {"jobs.load": 0.75, "jobs.save": 0.25}  # of 32 s run in a 4 s span
        table = str(made)
        assert re.search(r"jobs\.load .* 24\.00s │ 75% ", table), table


class TestOneAtATime:
    """Calls submitted and waited on one at a time: one finding per parent function."""

    def test_many_parents_of_one_function_are_one_finding(self, tmp_path: Path) -> None:
        """40 parents of jobs.fan_out, 5 children each: one finding that counts them."""
        write_many_parents(tmp_path, 40 * MANY_PARENTS_ROUND)
        (finding,) = [
            f for f in raytrace_kit.report(tmp_path).findings if f.kind == "one_at_a_time"
        ]
        assert finding.subject == "jobs.fan_out"
        assert finding.title == "Calls submitted and waited on one at a time by jobs.fan_out"
        assert finding.evidence.startswith(
            "40 of its calls waited on their 200 task calls one at a time: each started "
            "after the previous ended (the ray.get-in-a-loop pattern). One of them: call "
        )

    def test_one_parent_is_named_with_its_call(self, tmp_path: Path) -> None:
        """A single parent: its call id, and its children counted."""
        write_many_parents(tmp_path, MANY_PARENTS_ROUND)
        (finding,) = [
            f for f in raytrace_kit.report(tmp_path).findings if f.kind == "one_at_a_time"
        ]
        assert finding.evidence.startswith(
            f"one of its calls ({1001:010x}000001) waited on its 5 task calls one at a time"
        )

    def test_overlapping_children_are_no_finding(self, tmp_path: Path) -> None:
        """Children that ran together: submitted first, then waited on as a list."""
        parent, child = EventFile(tmp_path, 1001), EventFile(tmp_path, 1002)
        parent.start("aaaaaaaaaa000001", "jobs.fan_out", at=KNOWN_START)
        for index in range(6):
            call = f"bbbbbbbbbb{index:06x}"
            child.start(call, "jobs.step", parent="aaaaaaaaaa000001", at=KNOWN_START + 0.01)
            child.end(call, seconds=0.5, at=KNOWN_START + 0.51 + index * 0.001)
        parent.end("aaaaaaaaaa000001", seconds=0.6, at=KNOWN_START + 0.6)
        for events in (parent, child):
            events.close()
        made = raytrace_kit.report(tmp_path)
        assert made.overview["calls"] == 7
        assert not [f for f in made.findings if f.kind == "one_at_a_time"]


class TestWork:
    """What a report's work grows with: its events, not its parents times its files."""

    def test_twice_the_events_take_about_twice_the_work(self, tmp_path: Path) -> None:
        """200,000 events of many parents cost under 2.5 times what 100,000 cost.

        Measured as a ratio of this process's CPU time (best of 5, interleaved), not as a
        time: a busy machine slows both alike. A report that read a parent's files again
        to name it (each parent is read before its children) grew with parents times
        file size: four times the work for twice the events.
        """
        small, large = tmp_path / "small", tmp_path / "large"
        write_many_parents(small, 50_000)  # calls: 2 events each
        write_many_parents(large, 100_000)
        best = {small: math.inf, large: math.inf}
        for path in (small, large):
            raytrace_kit.report(path)  # warm: imports, the page cache
        for _ in range(5):
            for path in (small, large):
                gc.collect()  # what the round before left is not this round's work
                began = time.process_time()
                made = raytrace_kit.report(path)
                best[path] = min(best[path], time.process_time() - began)
                assert made.overview["calls"] == (50_000 if path == small else 100_000)
                del made
        ratio = best[large] / best[small]
        assert ratio < 2.5, f"{best[small]:.2f} s of CPU, then {best[large]:.2f} s: {ratio:.2f}x"


class TestQueues:
    """Submission records in a report: time in queue, calls never started (no Ray)."""

    def test_queue_time_and_never_started(self, tmp_path: Path) -> None:
        """A call started 2.5 s after its .remote(); another never started: both said."""
        from raytrace_kit._output import encode, submissions  # noqa: PLC0415
        from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415

        node, base = "ab" * 28, 1_800_000_000.0
        driver = ProcessIdentity("01000000", node, "cd" * 28, 100, is_worker=False)
        worker = ProcessIdentity("01000000", node, "ef" * 28, 200, is_worker=True)
        prefix = submissions.submit_prefix("app.step", "task", {"CPU": 1.0}, None)
        ran, never = "11" * 24, "22" * 24
        (tmp_path / f"events-{node[:12]}-100.jsonl").write_bytes(
            submissions.submit_line(base, prefix, ran, None, None, driver, "/app/job.py:4", None)
            + submissions.submit_line(
                base + 1, prefix, never, None, None, driver, "/app/job.py:9", None
            )
        )
        members = encode.call_members(
            call_id="0123456789abcdef",
            spec_fragment=encode.members({"function": "app.step", "kind": "task"}),
            mode="ray", task_id=ran, actor_id=None, identity=worker, attempt=0,
        )  # fmt: skip
        state = encode.output_state.state
        state.clock = (-1, "")
        start = encode.call_line("call.start", "info", members)
        end = encode.call_line(
            "call.end", "info", members, encode.end_members(0.5, None, 0.1, figures=(1, 1, 1))
        )
        started = encode.stamp(base + 2.5).encode()
        ended = encode.stamp(base + 3.0).encode()
        stamped = start.replace(start[14:46], started) + end.replace(end[14:46], ended)
        (tmp_path / f"events-{node[:12]}-200.jsonl").write_bytes(stamped)
        made = raytrace_kit.report(tmp_path)
        (queued,) = made.queued
        assert (queued["function"], queued["count"]) == ("app.step", 1)
        assert math.isclose(queued["max_s"], 2.5, abs_tol=1e-6)
        (missing,) = made.never_started
        assert (missing["site"], missing["task_id"]) == ("/app/job.py:9", never)

    def test_no_call_started(self, tmp_path: Path) -> None:
        """A job killed while all its calls waited for resources: each listed, none queued."""
        from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415

        node, base = "ab" * 28, 1_800_000_000.0
        driver = ProcessIdentity("01000000", node, "cd" * 28, 100, is_worker=False)
        prefix = submissions.submit_prefix("app.step", "task", {"GPU": 1.0}, None)
        tasks = [f"{k:02d}" * 24 for k in range(3)]
        (tmp_path / f"events-{node[:12]}-100.jsonl").write_bytes(b"".join(
            submissions.submit_line(base + k, prefix, task, None, None, driver, "/app/job.py:4",
                                    None)
            for k, task in enumerate(tasks)
        ))  # fmt: skip
        made = raytrace_kit.report(tmp_path)
        assert made.queued == []
        assert [row["task_id"] for row in made.never_started] == tasks
        assert [row["site"] for row in made.never_started] == ["/app/job.py:4"] * 3

    def test_submitted_twice_and_no_site(self, tmp_path: Path) -> None:
        """A task's second record counts once; a record with an empty site is of no line.

        2,100 tasks each recorded twice and run, then one more that never started: it is
        among the first 4,000 tasks read, so its id is listed. Eight calls with
        ``"site":""``, each submitted after the one before ended: no loop at an empty line.
        """
        from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415

        driver = ProcessIdentity("01000000", "ab" * 28, "cd" * 28, 100, is_worker=False)
        prefix = submissions.submit_prefix("app.step", "task", {"CPU": 1.0}, None)
        ran = Process(tmp_path, 200)
        tasks = [task_of(f"a{k:015x}") for k in range(2101)]
        for k, task in enumerate(tasks[:-1] * 2 + tasks[-1:]):
            ran.writer.write(
                submissions.submit_line(ORIGIN + k / 1000, prefix, task, None, None, driver,
                                        "/app/a.py:3", None)
            )  # fmt: skip
        for k, task in enumerate(tasks[:-1]):
            ran.call(f"a{k:015x}", "app.step", 5.0 + k / 1000, 5.0005 + k / 1000, task=task)
        made = raytrace_kit.report(tmp_path)
        assert [row["task_id"] for row in made.never_started] == tasks[-1:]
        (queued,) = made.queued
        assert queued["count"] == 2100
        unlined = tmp_path / "unlined"
        unlined.mkdir()
        ran = Process(unlined, 200)
        for k in range(8):
            task = task_of(f"d00000000000000{k}")
            ran.writer.write(
                submissions.submit_line(ORIGIN + 10 * k, prefix, task, None, None, driver, "",
                                        None)
            )  # fmt: skip
            ran.call(f"d00000000000000{k}", "app.step", 10 * k + 1, 10 * k + 2, task=task)
        assert [f for f in raytrace_kit.report(unlined).findings if f.kind == "driver_loop"] == []


def test_an_actor_restart_is_no_retry(tmp_path: Path) -> None:
    """A restarted actor's ``__init__`` is no retry: only a retry after a failure counts.

    Ray runs the creation task again (attempt 1) when it restarts an actor whose first
    ``__init__`` ended well; the task its retry saved counts, and the finding names it.
    """
    first, second = Process(tmp_path, 100), Process(tmp_path, 101)
    store, flaky = task_of("a000000000000001"), task_of("b000000000000001")
    first.call("a000000000000001", "jobs.Store.__init__", 0.0, 0.1, task=store, kind="actor_init")
    second.call(
        "a000000000000002", "jobs.Store.__init__", 5.0, 5.1, task=store, attempt=1,
        kind="actor_init",
    )  # fmt: skip
    first.call("b000000000000001", "jobs.flaky", 1.0, 1.1, ValueError("x"), task=flaky)
    second.call("b000000000000002", "jobs.flaky", 2.0, 2.1, task=flaky, attempt=1)
    made = raytrace_kit.report(tmp_path)
    assert (made.overview["retried"], made.overview["failed_tasks"]) == (1, 0)
    (finding,) = [f for f in made.findings if f.kind == "flaky_retries"]
    assert finding.title == "Retries hide flaky functions: jobs.flaky"


@pytest.mark.parametrize("force", [True, False])
def test_a_call_ended_by_a_forced_cancel_is_said_so(tmp_path: Path, force: bool) -> None:
    """``ray.cancel(ref, force=True)`` kills the worker: its ``call.cancel`` says why.

    Not the OOM killer, not a native crash, and no finding: the user asked for it. A
    cancel without force kills no process: a call that never ended is a death to explain.
    """
    worker, driver = Process(tmp_path, dead_pid()), Process(tmp_path, dead_pid())
    task = task_of("c000000000000001")
    worker.start("c000000000000001", "jobs.sleeper", 1.0, task=task)
    driver.writer.write(submissions.cancel_line(ORIGIN + 2.0, task, force, driver.identity))
    made = raytrace_kit.report(tmp_path)
    (row,) = made.interrupted
    deaths = [f.title for f in made.findings if f.kind.startswith("death")]
    if force:
        assert (row["state"], row["cause"]) == ("died", FORCE_CANCELLED)
        assert deaths == []
    else:
        assert row["cause"] is None
        assert deaths == ["Processes died during calls"]


def test_another_writers_stamps_give_the_same_report(tmp_path: Path) -> None:
    """Milliseconds and ``Z`` (another writer's lines, a converted session): the same answers.

    The start time read in place from the kit's 32-character stamp took part of the next
    key from a shorter one (``ValueError`` from the whole report), as did the header's
    first event.
    """
    kit, other = tmp_path / "kit", tmp_path / "other"
    write_many_parents(kit, 2_000)
    other.mkdir()
    stamp = re.compile(r'"timestamp":"([0-9T:-]+\.[0-9]{3})[0-9]{3}\+00:00"')
    for file in kit.iterdir():
        text, changed = stamp.subn(r'"timestamp":"\1Z"', file.read_text())
        assert changed == text.count("\n")  # every line's stamp
        (other / file.name).write_text(text)
    ours, theirs = raytrace_kit.report(kit).to_dict(), raytrace_kit.report(other).to_dict()
    assert theirs["overview"]["calls"] == 2_000
    for key in ("calls", "failed", "interrupted", "processes", "functions"):
        assert theirs["overview"][key] == ours["overview"][key], key
    assert math.isclose(theirs["overview"]["span_s"], ours["overview"]["span_s"], abs_tol=2e-3)
    assert sorted(f["title"] for f in theirs["findings"]) == sorted(
        f["title"] for f in ours["findings"]
    )
    assert header._first_event(open_session(other)) == header._first_event(open_session(kit))
