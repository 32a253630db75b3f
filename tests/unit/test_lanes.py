"""A process's lane stays bounded however many calls it made, and its sums stay exact."""

from __future__ import annotations

from pathlib import Path

import pytest

import raytrace_kit
from raytrace_kit._reports.run import MARKS, POINTS
from tests import helpers
from tests.helpers import KNOWN_START, shapes


class TestBounded:
    """20,000 calls of one process: a few hundred points, and nothing lost from the sums."""

    CALLS = 20_000

    @pytest.fixture
    def made(self, tmp_path: Path) -> raytrace_kit.Report:
        """One process: a call every 10 ms, each running 5 ms; every tenth fails."""
        events = helpers.EventFile(tmp_path, 1001)
        for index in range(self.CALLS):
            begun = KNOWN_START + index * 0.01
            events.start(f"c{index:015x}", "jobs.step", at=begun)
            error = ValueError("bad") if index % 10 == 0 else None
            events.end(f"c{index:015x}", error, seconds=0.005, at=begun + 0.005)
        events.close()
        return raytrace_kit.report(tmp_path)

    def test_the_points_are_few_and_their_sums_exact(self, made: raytrace_kit.Report) -> None:
        (lane,) = made.charts["lanes"]
        points = lane["points"]
        assert POINTS <= len(points) < 2 * POINTS
        assert lane["calls_per_point"] > 1
        assert sum(p[1] for p in points) == self.CALLS
        assert sum(p[2] for p in points) == pytest.approx(self.CALLS * 0.005)
        assert sum(p[3] for p in points) == self.CALLS // 10
        ends = [p[0] for p in points]
        assert ends == sorted(ends)
        assert ends[-1] == pytest.approx((self.CALLS - 1) * 0.01 + 0.005)

    def test_failures_are_marked_over_the_whole_run_a_bounded_few(
        self, made: raytrace_kit.Report
    ) -> None:
        (lane,) = made.charts["lanes"]
        assert lane["failure_count"] == self.CALLS // 10
        assert MARKS <= len(lane["failures"]) < 2 * MARKS
        times = [f[0] for f in lane["failures"]]
        assert times[0] == pytest.approx(0.005)
        assert times[-1] > 0.9 * made.overview["span_s"]

    def test_a_stretch_of_calls_is_shaded_by_how_busy_it_was(
        self, made: raytrace_kit.Report
    ) -> None:
        (stream,) = (
            p for k, p in helpers.pictures(made._repr_html_()).items() if k == "task-stream"
        )
        stretches = list(shapes(stream, "rect", "calls"))
        assert len(stretches) == len(made.charts["lanes"][0]["points"])
        shades = [float(s.get("fill-opacity", "")) for s in stretches[1:]]
        assert shades == pytest.approx([0.5] * len(shades), abs=0.01)  # 5 ms of every 10 ms
