"""report() on runs written by the kit's own renderer and writer: its findings, its work."""

from __future__ import annotations

import math
import time
from pathlib import Path

import raytrace_kit
from tests.helpers import KNOWN_START, EventFile, write_many_parents


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


class TestWork:
    """What a report's work grows with: its events, not its parents times its files."""

    def test_twice_the_events_take_about_twice_the_work(self, tmp_path: Path) -> None:
        """200,000 events of many parents cost under 2.5 times what 100,000 cost.

        Measured as a ratio of this process's CPU time (best of 3, interleaved), not as a
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
        for _ in range(3):
            for path in (small, large):
                began = time.process_time()
                made = raytrace_kit.report(path)
                best[path] = min(best[path], time.process_time() - began)
                assert made.overview["calls"] == (50_000 if path == small else 100_000)
        ratio = best[large] / best[small]
        assert ratio < 2.5, f"{best[small]:.2f} s of CPU, then {best[large]:.2f} s: {ratio:.2f}x"
