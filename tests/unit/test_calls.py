"""Calls read back from stored event files (``_reports/reading/calls.py``), as the kit wrote them.

A process's file rotates at a size limit (``events-X.jsonl`` becomes ``events-X.1.jsonl``,
and so on), so a call's start and end can be in two files; a call whose process died has
a start and no end. The files here are written in ``tmp_path`` by the kit's own encoder
and writer, the rotation included.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from raytrace_kit._reports.reading import (
    StartLine,
    distinct_processes,
    has_submissions,
    iter_calls,
    processes,
)
from raytrace_kit._reports.reading import calls as calls_module
from raytrace_kit._reports.reading import counts as counts_module
from tests.helpers import EventFile


def rotating(directory: Path, monkeypatch: pytest.MonkeyPatch, pid: int = 100) -> EventFile:
    """A process's file that rotates before every line: one line per file, five kept."""
    monkeypatch.setenv("RAYTRACE_ROTATION_MAX_BYTES", "1")
    monkeypatch.setenv("RAYTRACE_ROTATION_BACKUP_COUNT", "5")
    return EventFile(directory, pid)


def lines_of(file: Path) -> list[str]:
    return file.read_text().splitlines()


class TestRotatedFiles:
    """``processes`` and ``iter_calls``: one process's files, oldest first, calls joined."""

    @pytest.fixture
    def files(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
        """Calls a and b, overlapping, each line in its own file; c never ends."""
        events = rotating(tmp_path, monkeypatch)
        events.start("a", "jobs.load")
        events.start("b", "jobs.parse")
        events.end("a", seconds=1.5)
        events.end("b", KeyError("k"))
        events.start("c", "jobs.stuck")
        events.close()
        return sorted(tmp_path.iterdir())

    def test_rotation_spread_the_lines(self, files: list[Path]) -> None:
        """Five files of one line each: the writer rotated before every line."""
        assert [len(lines_of(file)) for file in files] == [1] * 5

    def test_one_process_oldest_file_first(self, files: list[Path]) -> None:
        """The files group as one process: .4, .3, .2, .1, then the current file."""
        (group,) = processes(files)
        stem = files[0].name.split(".")[0]
        assert [f.name for f in group] == [
            f"{stem}.4.jsonl",
            f"{stem}.3.jsonl",
            f"{stem}.2.jsonl",
            f"{stem}.1.jsonl",
            f"{stem}.jsonl",
        ]

    def test_a_call_that_spans_a_rotation_joins_its_start_and_end(self, files: list[Path]) -> None:
        """Each finished call has its start's time and memory, from the older file."""
        (group,) = processes(files)
        calls = {call.call_id: call for call in iter_calls(group)}
        started_a, started_b = lines_of(group[0])[0], lines_of(group[1])[0]
        a, b = calls["a"], calls["b"]
        assert (a.function, a.status, a.duration_s) == ("jobs.load", "ok", 1.5)
        assert (b.function, b.status, b.error_type) == ("jobs.parse", "error", "KeyError")
        assert a.started in started_a
        assert b.started in started_b
        assert a.started <= b.started <= a.ended <= b.ended
        assert a.rss_start_bytes == 2**20

    def test_a_call_with_no_end_comes_out_interrupted_and_last(self, files: list[Path]) -> None:
        """The start without an end: status "interrupted", no end, after the finished ones."""
        (group,) = processes(files)
        calls = list(iter_calls(group))
        assert [call.call_id for call in calls] == ["a", "b", "c"]
        stuck = calls[-1]
        assert (stuck.function, stuck.status, stuck.ended) == ("jobs.stuck", "interrupted", None)
        assert stuck.started in lines_of(group[-1])[0]
        assert (stuck.rss_start_bytes, stuck.rss_end_bytes) == (2**20, None)

    def test_a_line_cut_short_is_skipped(self, tmp_path: Path) -> None:
        """A process killed mid-line loses that line only; the calls before it are read."""
        events = EventFile(tmp_path, 100)
        events.start("a", "jobs.load")
        events.end("a")
        events.close()
        with events.path.open("ab") as file:
            file.write(b'{"timestamp":"2026-01-01T00:00:00.000000+00:00","event":"call.end","ca')
        assert [(c.call_id, c.status) for c in iter_calls([events.path])] == [("a", "ok")]


class TestDistinctProcesses:
    """``distinct_processes``: each process's files once, however often they were copied."""

    def test_two_processes_are_two(self, tmp_path: Path) -> None:
        """Two pids' files: two groups."""
        for pid in (100, 200):
            events = EventFile(tmp_path, pid)
            events.start("a", "jobs.load")
            events.close()
        assert len(distinct_processes(sorted(tmp_path.iterdir()))) == 2

    def test_a_copy_counts_once_and_the_fuller_copy_wins(self, tmp_path: Path) -> None:
        """A collection taken while the process ran is a prefix: the longer file is read."""
        node, collected = tmp_path / "node", tmp_path / "collected"
        events = EventFile(node, 100)
        events.start("a", "jobs.load")
        events.close()
        collected.mkdir()
        shutil.copy(events.path, collected / events.path.name)  # taken during the call
        events.end("a")
        events.close()
        files = sorted(tmp_path.rglob("events-*.jsonl"))
        (group,) = distinct_processes(files)
        assert group == [events.path]
        assert [c.status for c in iter_calls(group)] == ["ok"]


class TestLinesFoundInPlace:
    """``iter_calls`` finds lines in each block in place: every line, whatever its block."""

    def test_lines_across_block_edges_arrive_whole_and_in_order(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Blocks of 50 bytes cut every line: calls join, other lines come whole, in order.

        The file's last line, cut short with no newline (a process killed mid-write), is
        the last line handed on, as it is.
        """
        monkeypatch.setattr(calls_module, "_BLOCK", 50)
        events = EventFile(tmp_path, 100)
        events.start("a", "jobs.load")
        events.close()
        submit = (
            b'{"timestamp":"2026-01-01T00:00:01.000000+00:00","event":"call.submit","task_id":"t1"}'
        )
        logged = b'{"timestamp":"2026-01-01T00:00:02.000000+00:00","event":"user.step","n":1}'
        with events.path.open("ab") as file:
            file.write(submit + b"\n" + logged + b"\n\n")
        events.start("b", "jobs.parse")
        events.end("a", seconds=1.5)
        events.end("b", KeyError("k"))
        events.close()
        with events.path.open("ab") as file:
            file.write(b'{"event":"user.cut","n":')
        others: list[bytes] = []
        seen: list[bytes] = []
        made = [
            (c.call_id, c.status)
            for c in iter_calls([events.path], None, others.append, seen.append)
        ]
        assert made == [("a", "ok"), ("b", "error")]
        assert others == [submit]
        assert seen == [logged, b"", b'{"event":"user.cut","n":']

    def test_the_start_line_is_at_hand_as_each_call_goes_by(self, tmp_path: Path) -> None:
        """``StartLine`` holds the very ``call.start`` line of the call just yielded."""
        events = EventFile(tmp_path, 100)
        events.start("a", "jobs.load")
        events.start("b", "jobs.parse")
        events.end("b")
        events.end("a")
        events.close()
        starts = {line.split('"call_id":"')[1][:1]: line for line in lines_of(events.path)[:2]}
        held = StartLine()
        pairs = [(c.call_id, held.line) for c in iter_calls([events.path], held)]
        assert pairs == [("b", starts["b"].encode()), ("a", starts["a"].encode())]


class TestHasSubmissions:
    """``has_submissions``: the start of every file first, then the rest of each."""

    def test_a_submission_late_in_a_large_file_is_found(self, tmp_path: Path) -> None:
        """Past the part searched first (and across its edge): found all the same."""
        record = b'{"timestamp":"2026-01-01T00:00:00.000000+00:00","event":"call.submit"}\n'
        quiet = tmp_path / "events-a.jsonl"
        quiet.write_bytes(b"x" * 100 + b"\n")
        for at in (counts_module._HEAD - 10, 3 * counts_module._HEAD):
            late = tmp_path / "events-b.jsonl"
            late.write_bytes(b"y" * at + record)
            assert has_submissions([quiet, late])
        late.write_bytes(b"y" * 3 * counts_module._HEAD)
        assert not has_submissions([quiet, late, tmp_path / "gone.jsonl"])
