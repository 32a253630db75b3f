"""Calls read back from stored event files (``_reports.calls``), written by the kit's writer.

A process's file rotates at a size limit (``events-X.jsonl`` becomes ``events-X.1.jsonl``,
and so on), so a call's start and end can be in two files; a call whose process died has
a start and no end. The files here are written in ``tmp_path`` by the kit's own encoder
and writer, the rotation included.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from raytrace_kit._reports.calls import distinct_processes, iter_calls, processes
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
