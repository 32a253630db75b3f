"""The live view's reading and merging, on files written as the kit writes them (no Ray).

A node's reader reads only what was written since its last look, follows a rotated file
under its new name, catches up on a backlog over several looks; the nodes' views add up
to the cluster's: calls submitted on one node and started on another are not pending,
failures come with their error line, a call far beyond its function's median is named.
"""

from __future__ import annotations

import os
from pathlib import Path

from raytrace_kit._output import submissions
from raytrace_kit._reports.live import Cursor, LiveTally, merge
from tests.helpers import KNOWN_START, EventFile

NODE_A, NODE_B = "aa" * 28, "bb" * 28


def _look(tally: LiveTally, cursor: Cursor) -> dict[str, object]:
    for name, lines in cursor.read():
        tally.take(lines, name)
    return {**tally.snapshot(now=KNOWN_START + 100), "node_id": "n", "behind": cursor.behind}


class TestCursor:
    """New complete lines only, file by file, by inode."""

    def test_each_look_reads_only_what_was_written_since(self, tmp_path: Path) -> None:
        events = EventFile(tmp_path, 10)
        events.start("c000000000000001", "jobs.a", at=KNOWN_START)
        cursor = Cursor(tmp_path)
        assert [len(lines) for _, lines in cursor.read()] == [1]
        assert cursor.read() == []
        events.end("c000000000000001", seconds=0.5, at=KNOWN_START + 0.5)
        ((_, lines),) = cursor.read()
        assert b'"event":"call.end"' in lines[0]

    def test_a_line_being_written_waits_for_its_end(self, tmp_path: Path) -> None:
        path = tmp_path / "events-aaaaaaaaaaaa-1.jsonl"
        path.write_bytes(b'{"event":"call.start"}\n{"event":"call.e')
        cursor = Cursor(tmp_path)
        assert [lines for _, lines in cursor.read()] == [[b'{"event":"call.start"}']]
        with path.open("ab") as handle:
            handle.write(b'nd"}\n')
        assert [lines for _, lines in cursor.read()] == [[b'{"event":"call.end"}']]

    def test_a_rotated_file_is_followed_under_its_new_name(self, tmp_path: Path) -> None:
        path = tmp_path / "events-aaaaaaaaaaaa-1.jsonl"
        path.write_bytes(b'{"n":1}\n')
        cursor = Cursor(tmp_path)
        cursor.read()
        with path.open("ab") as handle:
            handle.write(b'{"n":2}\n')
        path.rename(tmp_path / "events-aaaaaaaaaaaa-1.1.jsonl")  # rotated: a new file after
        (tmp_path / "events-aaaaaaaaaaaa-1.jsonl").write_bytes(b'{"n":3}\n')
        found = sorted(line for _, lines in cursor.read() for line in lines)
        assert found == [b'{"n":2}', b'{"n":3}']  # nothing read twice, nothing lost

    def test_from_the_end_skips_what_was_there(self, tmp_path: Path) -> None:
        path = tmp_path / "events-aaaaaaaaaaaa-1.jsonl"
        path.write_bytes(b'{"n":1}\n')
        cursor = Cursor(tmp_path, from_end=True)
        assert cursor.read() == []
        with path.open("ab") as handle:
            handle.write(b'{"n":2}\n')
        (tmp_path / "events-bbbbbbbbbbbb-2.jsonl").write_bytes(b'{"n":3}\n')  # new: whole
        assert sorted(line for _, lines in cursor.read() for line in lines) == [
            b'{"n":2}', b'{"n":3}',
        ]  # fmt: skip

    def test_a_backlog_is_read_over_several_looks(self, tmp_path: Path) -> None:
        (tmp_path / "events-aaaaaaaaaaaa-1.jsonl").write_bytes(b'{"n":1}\n' * 1000)
        cursor = Cursor(tmp_path, budget=2000)
        seen, looks = 0, 0
        while looks < 10:
            seen += sum(len(lines) for _, lines in cursor.read())
            looks += 1
            if not cursor.behind:
                break
        assert seen == 1000
        assert looks == 4  # 8,000 bytes at 2,000 a look


class TestMergedView:
    """Two nodes' views add up to the cluster's."""

    def test_counts_pending_failures_and_a_straggler(self, tmp_path: Path) -> None:
        one, two = tmp_path / "a", tmp_path / "b"
        one.mkdir()
        two.mkdir()
        a, b = EventFile(one, 11, node=NODE_A), EventFile(two, 12, node=NODE_B)
        # Node a's process submits 8 calls of jobs.fit; node b runs them.
        prefix = submissions.submit_prefix("jobs.fit", "task", {"CPU": 1.0}, None)
        with (one / a.path.name).open("ab") as handle:
            for i in range(8):
                task = f"c{i:015x}".ljust(48, "f")
                handle.write(
                    submissions.submit_line(
                        KNOWN_START, prefix, task, None, None, a.identity, "main.py:3", None
                    )
                )
        for i in range(6):  # six ran and ended: 1 s each but one, 20 s: a straggler
            b.start(f"c{i:015x}", "jobs.fit", at=KNOWN_START + i)
            error = ValueError("bad shard 4\nmore") if i == 4 else None
            b.end(f"c{i:015x}", error, seconds=20.0 if i == 5 else 1.0, at=KNOWN_START + i + 1)
        b.start(f"c{6:015x}", "jobs.fit", at=KNOWN_START + 7)  # running (its process lives)
        states = []
        for directory in (one, two):
            tally = LiveTally()
            states.append(_look(tally, Cursor(directory)))
        view = merge("cluster test", states, None, [])
        (row,) = view.functions
        assert (row["function"], row["done"], row["failed"]) == ("jobs.fit", 5, 1)
        assert (row["running"], row["pending"]) == (1, 1)  # 8 submitted, 7 started
        assert 0.9 < row["p50_s"] < 1.1
        (failure,) = view.failures
        assert failure["error"] == "ValueError: bad shard 4"  # the error's first line
        assert failure["node_id"] == NODE_B[:12]  # as its file names it
        # Beyond max(5 x median, median + 1 s): the one still running 93 s, the 20 s one.
        assert [(s["state"], s["running_s"]) for s in view.stragglers] == [
            ("running", 93.0), ("finished", 20.0),
        ]  # fmt: skip
        assert "jobs.fit" in str(view)
        assert os.linesep in str(view)

    def test_events_per_second_from_two_refreshes(self, tmp_path: Path) -> None:
        events = EventFile(tmp_path, 10)
        tally, cursor = LiveTally(), Cursor(tmp_path)
        first = merge("c", [_look(tally, cursor)], None, [])
        for i in range(10):
            events.start(f"d{i:015x}", "jobs.a", at=KNOWN_START)
        state = _look(tally, cursor)
        state["time"] = first.time + 2.0
        second = merge("c", [state], first, [])
        assert first.events_per_s is None
        assert second.events_per_s == 5.0

    def test_alike_failures_are_one_row_with_their_count(self, tmp_path: Path) -> None:
        one, two = tmp_path / "a", tmp_path / "b"
        one.mkdir()
        two.mkdir()
        a, b = EventFile(one, 11, node=NODE_A), EventFile(two, 12, node=NODE_B)
        for i in range(12):  # nineteen alike failures are one row: 12 + 7 on two nodes
            a.start(f"a{i:015x}", "jobs.fit", at=KNOWN_START + i)
            a.end(f"a{i:015x}", ValueError(f"bad shard {i}"), at=KNOWN_START + i + 0.5)
        for i in range(7):
            b.start(f"b{i:015x}", "jobs.fit", at=KNOWN_START + 20 + i)
            b.end(f"b{i:015x}", ValueError(f"bad shard {i}"), at=KNOWN_START + 20 + i + 0.5)
        b.start("c" * 16, "jobs.load", at=KNOWN_START + 30)
        b.end("c" * 16, KeyError("k"), at=KNOWN_START + 31)
        view = merge("c", [_look(LiveTally(), Cursor(d)) for d in (one, two)], None, [])
        groups = [(g["function"], g["error_type"], g["count"]) for g in view.failure_groups]
        assert groups == [("jobs.load", "KeyError", 1), ("jobs.fit", "ValueError", 19)]
        (fit,) = [g for g in view.failure_groups if g["function"] == "jobs.fit"]
        assert fit["example"]["error"] == "ValueError: bad shard 6"  # the latest one
        rows = [line for line in str(view).splitlines() if "jobs.fit" in line and "19" in line]
        assert rows, str(view)  # one row in the text, with its count
