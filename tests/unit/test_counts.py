"""Calls and failures counted by bytes (``_reports.reading.counts``) agree with the calls read back.

The files are written by the kit's own encoder and writer (``EventFile``), rotation
included; the counts are compared with what ``open_session(...).calls()`` decodes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from raytrace_kit import open_session
from raytrace_kit._reports.reading import Counts, count
from raytrace_kit._reports.reading import counts as counts_module
from tests.helpers import EventFile


def _run(directory: Path) -> list[Path]:
    """Two processes on two nodes: 4 calls, 2 failed (one a retry), 1 interrupted."""
    first = EventFile(directory, 100, node="ab" * 28)
    for call_id in ("a", "b", "c"):
        first.start(call_id, "jobs.load")
    first.end("a")
    first.end("b", ValueError("bad row 7"))
    first.close()  # c never ends: its process died
    second = EventFile(directory, 200, node="cd" * 28)
    second.start("d", "jobs.parse")
    second.end("d", KeyError("k"))
    second.close()
    return sorted(directory.rglob("events-*.jsonl"))


class TestCount:
    """``count``: what a glance at the files says, without decoding the kit's lines."""

    def test_the_counts_are_the_calls_read_back(self, tmp_path: Path) -> None:
        """Calls (interrupted included), failures, nodes, processes: as calls() finds them."""
        files = _run(tmp_path)
        read = open_session(tmp_path).calls()
        assert len(read) == 4
        assert sum(c.status == "error" for c in read) == 2
        assert count(files) == Counts(calls=4, failures=2, nodes=2, processes=2)

    @pytest.mark.parametrize("block", [7, 64, 333, 4096])
    def test_blocks_cut_anywhere_count_the_same(
        self, tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A line cut by a block's end is counted once, in the next block."""
        files = _run(tmp_path)
        monkeypatch.setattr(counts_module, "_BLOCK", block)
        assert count(files).calls == 4
        assert count(files).failures == 2

    def test_rotated_files_are_one_process(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A process whose file rotated before every line: its files count as one process."""
        monkeypatch.setenv("RAYTRACE_ROTATION_MAX_BYTES", "1")
        monkeypatch.setenv("RAYTRACE_ROTATION_BACKUP_COUNT", "10")
        files = _run(tmp_path)
        assert len(files) > 2
        assert count(files) == Counts(calls=4, failures=2, nodes=2, processes=2)

    def test_a_copied_process_counts_once(self, tmp_path: Path) -> None:
        """The same process's file found twice (a collection inside the folder): once."""
        files = _run(tmp_path / "node")
        copy = tmp_path / "collected"
        shutil.copytree(tmp_path / "node", copy)
        assert count(sorted(tmp_path.rglob("events-*.jsonl"))).calls == 4
        assert len(files) == 2

    def test_a_line_cut_short_is_not_counted(self, tmp_path: Path) -> None:
        """A process killed while writing leaves half a line: it is no call."""
        files = _run(tmp_path)
        with files[0].open("ab") as handle:
            handle.write(b'{"timestamp":"2026-01-01T00:00:00.000000+00:00","level":"info","eve')
        assert count(files).calls == 4

    def test_ends_without_starts_are_calls(self, tmp_path: Path) -> None:
        """Ends whose starts went to another session's files (local calls across ray.init)."""
        events = EventFile(tmp_path, 100)
        for call_id in ("a", "b"):
            events.start(call_id, "jobs.load")
            events.end(call_id, ValueError("x"))
        events.close()
        lines = events.path.read_bytes().splitlines(keepends=True)
        events.path.write_bytes(b"".join(line for line in lines if b"call.end" in line))
        assert count([events.path]) == Counts(2, 2, 1, 1)
        assert len(open_session(events.path).calls()) == 2

    def test_a_file_in_another_shape_is_decoded(self, tmp_path: Path) -> None:
        """Lines written by hand (spaces after colons) are decoded one by one instead."""
        lines = [
            {"timestamp": "2026-01-01T00:00:00+00:00", "event": "call.start", "call_id": "a"},
            {"timestamp": "2026-01-01T00:00:01+00:00", "event": "call.end", "call_id": "a",
             "status": "error"},
            {"timestamp": "2026-01-01T00:00:02+00:00", "event": "call.start", "call_id": "b"},
        ]  # fmt: skip
        path = tmp_path / "events-abababababab-7.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
        assert count([path]) == Counts(calls=2, failures=1, nodes=1, processes=1)
