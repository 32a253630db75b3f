"""A large session's report read by two processes is the one-pass report, byte for byte.

A run is written as the kit writes it (its encoder, ``tests/unit/test_merge.py``'s
processes): a driver whose submissions are most of the bytes, so its file is cut in two
at a byte offset, workers on two nodes running its calls (failures, a retry, a parent
whose children ran one at a time, an actor, a call without an end, calls never started).
Its report read by two processes (each a share of the files, merged as a cluster's nodes
are) must be the one-pass report: the same JSON, byte for byte.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from raytrace_kit._reports.cluster import parallel
from raytrace_kit._reports.reading import Piece, chunks, open_session
from raytrace_kit._reports.run import report
from tests.helpers import KNOWN_START
from tests.unit.test_merge import _Process, _task


def _write_run(root: Path) -> None:
    t0 = KNOWN_START
    driver = _Process(root, 0, 100)
    workers = [_Process(root, node % 2, 200 + node) for node in range(4)]
    for i in range(300):
        driver.submit(_task(i), "jobs.work", t0 + 0.01 * i, "main.py:12")
    for i in range(290):  # the last ten never start
        error = ValueError(f"bad {i}") if i % 37 == 5 else None
        took = 4.0 if i == 100 else 0.05 + 0.001 * (i % 7)
        workers[i % 4].call(
            f"{i + 1:016x}",
            "jobs.work",
            t0 + 0.5 + 0.02 * i,
            took,
            task=_task(i),
            error=error,
            grow=2**20 * (i % 4 == 1),
        )
    workers[1].call(
        "00000000000a0001",
        "jobs.flaky",
        t0 + 9,
        0.1,
        task=_task(900),
        error=ValueError("flaky input"),
    )
    workers[2].call("00000000000a0002", "jobs.flaky", t0 + 9.5, 0.1, task=_task(900), attempt=1)
    workers[0].call("00000000000b0000", "jobs.parent", t0 + 10, 2.0, task=_task(1000))
    for k in range(6):  # its children, one at a time, on the other node
        workers[1 + 2 * (k % 2)].call(
            f"00000000000b{k + 1:04x}",
            "jobs.child",
            t0 + 10.1 + 0.3 * k,
            0.2,
            task=_task(1001 + k),
            parent="00000000000b0000",
        )
    for k in range(8):
        workers[3].call(
            f"00000000000c{k:04x}",
            "jobs.Store.put",
            t0 + 12 + 0.1 * k,
            0.05,
            actor="a1" * 16,
            task=_task(2000 + k),
        )
    workers[2].call("00000000000d0000", "jobs.hang", t0 + 13, None, task=_task(3000))
    for i in range(3000):  # submissions that never started: the driver's file is the largest
        driver.submit(_task(5000 + i), "jobs.later", t0 + 20 + 0.001 * i, "main.py:40")


def _json(source: object) -> str:
    return json.dumps(source, indent=1)


class TestTwoReaders:
    """Two processes read a large session's shares; the merged report is the one-pass one."""

    def test_a_cut_driver_file_gives_the_one_pass_report(self, tmp_path: Path) -> None:
        _write_run(tmp_path)
        cut = parallel.shares(open_session(tmp_path).files, 2)
        assert cut is not None
        assert any(isinstance(f, Piece) for share in cut for group in share for f in group)
        one = report(tmp_path)
        two = parallel.report_in_parallel(tmp_path, processes=2)
        assert one.overview["calls"] == 308
        assert _json(two.to_dict()) == _json(one.to_dict())

    def test_a_window_gives_the_one_pass_report(self, tmp_path: Path) -> None:
        _write_run(tmp_path)
        since, until = "2025-06-02T12:00:02+00:00", "2025-06-02T12:00:12.5+00:00"
        one = report(tmp_path, since=since, until=until)
        two = parallel.report_in_parallel(tmp_path, since=since, until=until, processes=2)
        assert 0 < one.overview["calls"] < 308
        assert _json(two.to_dict()) == _json(one.to_dict())

    def test_a_process_with_calls_is_never_cut(self, tmp_path: Path) -> None:
        _write_run(tmp_path)
        files = open_session(tmp_path).files
        for parts in (2, 3, 5):
            for share in parallel.shares(files, parts) or []:
                for group in share:
                    cut = [f for f in group if isinstance(f, Piece)]
                    assert all(
                        "-100." in f.path.name or f.path.name.endswith("-100.jsonl") for f in cut
                    )

    def test_a_small_session_is_read_in_one_process(self, tmp_path: Path) -> None:
        _write_run(tmp_path)
        assert not parallel._worth_it(open_session(tmp_path))  # under PARALLEL_MIN_BYTES


class TestPieces:
    """Pieces of a file that meet at an offset hold each of its lines exactly once."""

    @settings(max_examples=60, deadline=None)
    @given(
        lines=st.lists(
            st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\n", b"")),
            min_size=1,
            max_size=30,
        ),
        cuts=st.lists(st.floats(0, 1), max_size=4),
    )
    def test_every_line_once(
        self, tmp_path_factory: object, lines: list[bytes], cuts: list[float]
    ) -> None:
        path = tmp_path_factory.mktemp("pieces") / "events-x-1.jsonl"  # type: ignore[attr-defined]
        data = b"".join(line + b"\n" for line in lines)
        path.write_bytes(data)
        offsets = [0, *sorted(round(c * len(data)) for c in cuts), len(data)]
        found = [
            line
            for start, stop in itertools.pairwise(offsets)
            for block, size in chunks(Piece(path, start, stop))
            for line in block[:size].split(b"\n")[:-1]
        ]
        assert found == lines
