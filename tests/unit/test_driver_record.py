"""The driver's record read back: which lines are loops, which waits had a straggler."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import raytrace_kit
from raytrace_kit._output import submissions
from raytrace_kit._process import ProcessIdentity

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def _get(line: int, at: float, blocked: float, tasks: list[str], submitted: int) -> dict[str, Any]:
    return {
        "timestamp": _at(at + blocked), "level": "info", "event": "driver.get", "schema": 2,
        "started": _at(at), "blocked_s": blocked, "file": "/work/app/main.py", "line": line,
        "function": "main", "refs": len(tasks), "submitted": submitted, "task_ids": tasks,
    }  # fmt: skip


def _call(call_id: str, task: str, start: float, end: float) -> list[dict[str, Any]]:
    ids = {"call_id": call_id, "function": "app.work", "kind": "task", "task_id": task,
           "node_id": "ab" * 28, "pid": 7, "job_id": "01000000"}  # fmt: skip
    return [
        {"timestamp": _at(start), "level": "info", "event": "call.start", **ids},
        {"timestamp": _at(end), "level": "info", "event": "call.end", "status": "ok",
         "duration_s": end - start, **ids},
    ]  # fmt: skip


def _write(directory: Path, driver: list[dict[str, Any]], calls: list[dict[str, Any]]) -> None:
    run = {"timestamp": _at(0), "level": "info", "event": "run.start", "schema": 2,
           "script": "main.py", "arg_count": 0, "cwd": "/work/app", "pid": 42}  # fmt: skip
    end = {"timestamp": _at(60), "level": "info", "event": "run.end", "schema": 2,
           "duration_s": 60.0, "exit_status": 0}  # fmt: skip
    lines = [run, *driver, end]
    (directory / "driver-abababababab-42.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines)
    )
    (directory / "events-abababababab-7.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in calls)
    )


class TestLoops:
    """Only a line whose gets each waited on the one call just submitted is a loop."""

    def test_loop_line_named_other_lines_not(self, tmp_path: Path) -> None:
        driver = [
            *(_get(10, i, 0.01, [f"{i:048x}"], 1) for i in range(6)),  # a loop
            *(_get(20, 10 + i, 0.01, [f"{i:047x}a"], 2) for i in range(6)),  # two per get
            *(_get(30, 20 + i, 0.01, ["1" * 48, "2" * 48], 2) for i in range(6)),  # lists
        ]
        _write(tmp_path, driver, _call("c1", "f" * 48, 0, 1))
        made = raytrace_kit.report(tmp_path)
        loops = [f for f in made.findings if f.kind == "driver_loop"]
        assert [f.subject for f in loops] == ["/work/app/main.py:10"]
        assert loops[0].title == (
            "ray.get in a loop in the driver: main.py:10 waited on 6 calls one at a time"
        )  # no submission records: which function is not known
        assert made.driver["waits"] == 18
        assert [s["where"] for s in made.driver["sites"]][:1] == ["main.py:10"]

    def test_short_waits_summed_per_line_count_too(self, tmp_path: Path) -> None:
        """Gets under 10 ms are written as sums per line (driver.waits), loops found in them."""
        sums = [
            {"timestamp": _at(5 + i), "level": "info", "event": "driver.waits", "schema": 2,
             "waits": "driver.get", "since": _at(4 + i), "file": "/work/app/main.py",
             "line": 60, "function": "main", "count": 4, "blocked_s": 0.008,
             "longest_s": 0.003, "serial": 3, "serial_blocked_s": 0.006}
            for i in range(2)
        ]  # fmt: skip
        _write(tmp_path, sums, _call("c1", "f" * 48, 0, 1))
        made = raytrace_kit.report(tmp_path)
        (loop,) = [f for f in made.findings if f.kind == "driver_loop"]
        assert loop.subject == "/work/app/main.py:60"
        assert loop.evidence.startswith("6 ray.get calls at main.py:60 (in main)")
        assert "blocked 0.01 s there in all" in loop.evidence
        (site,) = made.driver["sites"]
        assert (site["count"], site["longest_s"]) == (8, 0.003)

    def test_the_functions_it_waited_on_most_first(self, tmp_path: Path) -> None:
        """The calls submitted at the loop's line name its functions, each with its count."""
        identity = ProcessIdentity("01000000", "ab" * 28, "cd" * 28, 42, is_worker=False)
        functions = ["app.load", "app.score", "app.score", "app.score", "app.load", "app.score"]
        tasks = [f"{k:048x}" for k in range(len(functions))]
        submitted = b"".join(
            submissions.submit_line(
                T0.timestamp() + k, submissions.submit_prefix(name, "task", {"CPU": 1.0}, None),
                task, None, None, identity, "/work/app/main.py:10", None,
            )
            for k, (name, task) in enumerate(zip(functions, tasks, strict=True))
        )  # fmt: skip
        driver = [_get(10, k, 0.01, [task], 1) for k, task in enumerate(tasks)]
        _write(tmp_path, driver, _call("c1", "f" * 48, 0, 1))
        (tmp_path / "events-abababababab-42.jsonl").write_bytes(submitted)
        made = raytrace_kit.report(tmp_path)
        (loop,) = [f for f in made.findings if f.kind == "driver_loop"]
        assert loop.title == (
            "ray.get in a loop in the driver: main.py:10 waited on 6 calls one at a time "
            "(4 of app.score, 2 of app.load)"
        )
        as_json = json.loads(json.dumps(made.to_dict()))  # as report --json prints it
        (found,) = [f for f in as_json["findings"] if f["kind"] == "driver_loop"]
        assert found["functions"] == [
            {"function": "app.score", "calls": 4},
            {"function": "app.load", "calls": 2},
        ]


def _the_straggler(
    directory: Path, driver: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> raytrace_kit.Finding:
    """The one driver's-straggler finding of the report of these records."""
    _write(directory, driver, calls)
    (found,) = [f for f in raytrace_kit.report(directory).findings if f.kind == "driver_straggler"]
    return found


class TestStragglers:
    """A long wait whose last call held it alone names that call; an even one names none."""

    def test_the_call_that_held_the_wait(self, tmp_path: Path) -> None:
        slow, even = ["a" * 48, "b" * 48, "c" * 48], ["d" * 48, "e" * 48, "f" * 48]
        driver = [_get(40, 1.0, 5.0, slow, 3), _get(50, 10.0, 5.0, even, 3)]
        calls = [
            *_call("s1", slow[0], 1.0, 1.2), *_call("s2", slow[1], 1.0, 1.3),
            *_call("s3", slow[2], 1.0, 5.9),  # held the wait alone 4.6 s
            *_call("e1", even[0], 10.0, 14.7), *_call("e2", even[1], 10.0, 14.8),
            *_call("e3", even[2], 10.0, 14.9),  # all slow alike: no straggler
        ]  # fmt: skip
        found = _the_straggler(tmp_path, driver, calls)
        assert "ray.get at main.py:40 (in main) blocked 5.00 s on 3 calls" in found.evidence
        assert "2 were done 0.30 s in, and call s3 (task cccccccccccccccc" in found.evidence
        assert "held it 4.60 s more" in found.evidence

    def test_a_call_that_began_late_is_no_straggler(self, tmp_path: Path) -> None:
        """The last call ran 0.05 s but began 2.5 s late (a worker starting): not its input.

        CI saw this on a clean Ray Data pipeline: 7 of 8 tiny tasks done at once, the eighth
        waiting for a worker process, and the report blamed the eighth call's input.
        """
        late, slow = ["a" * 48, "b" * 48, "c" * 48], ["d" * 48, "e" * 48, "f" * 48]
        driver = [_get(40, 1.0, 3.0, late, 3), _get(50, 10.0, 5.0, slow, 3)]
        calls = [
            *_call("l1", late[0], 1.0, 1.1), *_call("l2", late[1], 1.0, 1.2),
            *_call("l3", late[2], 3.7, 3.75),  # held it 2.55 s, ran 0.05 s of them
            *_call("s1", slow[0], 10.0, 10.2), *_call("s2", slow[1], 10.0, 10.3),
            *_call("s3", slow[2], 11.0, 14.9),  # began 0.7 s late, then ran 3.9 s alone
        ]  # fmt: skip
        found = _the_straggler(tmp_path, driver, calls)
        assert "ray.get at main.py:50 (in main)" in found.evidence
        assert "call s3 (task ffffffffffffffff" in found.evidence
        assert "held it 4.60 s more" in found.evidence


class TestSubmittedLoops:
    """The driver's call.submit records: a line whose calls ran one after another."""

    def test_calls_submitted_in_the_same_microsecond_one_never_started(
        self, tmp_path: Path
    ) -> None:
        """Two calls of the loop's line with one stamp, one never started: named, no crash.

        Seen on a session of a million events: sorting the line's (submitted, ended)
        pairs compared a never-ended call's None with the other's end and the report
        raised TypeError.
        """
        identity = ProcessIdentity("01000000", "ab" * 28, "cd" * 28, 42, is_worker=False)
        prefix = submissions.submit_prefix("app.work", "task", {"CPU": 1.0}, None)
        submitted = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0]  # the last two: one stamp
        tasks = [f"{k:048x}" for k in range(len(submitted))]
        driver = b"".join(
            submissions.submit_line(T0.timestamp() + at, prefix, task, None, None, identity,
                                    "/work/app/main.py:12", None)
            for at, task in zip(submitted, tasks, strict=True)
        )  # fmt: skip
        (tmp_path / "events-abababababab-42.jsonl").write_bytes(driver)
        calls = [  # each ends before the next is submitted; the last never started
            line
            for k, at in enumerate(submitted[:-1])
            for line in _call(f"c{k}", tasks[k], at + 0.1, at + 0.5)
        ]
        (tmp_path / "events-abababababab-7.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in calls)
        )
        made = raytrace_kit.report(tmp_path)
        (loop,) = [f for f in made.findings if f.kind == "driver_loop"]
        assert loop.title == (
            "ray.get in a loop in the driver: /work/app/main.py:12 waited on 8 calls of "
            "app.work one at a time"
        )
        assert [asdict(c) for c in loop.functions] == [{"function": "app.work", "calls": 8}]
        assert loop.evidence.startswith("6 of the 8 calls submitted at /work/app/main.py:12")
        assert [c["task_id"] for c in made.never_started] == [tasks[-1]]
