"""The report's pictures say what the run's records say (a run of a known shape, no Ray).

The run (``helpers.write_known_run``): pid 1001 runs ``jobs.parse`` six times, 0.5 s each;
the fourth fails at 2.0 s, and a seventh starts at 4.0 s and never ends. pid 1002 runs
``jobs.fetch`` six times, 0.2 s each but one of 3.0 s (from 1.2 s), its memory rising
16 MiB a call from 200 MiB. Positions are checked against each picture's own axis (its
tick labels and where they are drawn), so a mark drawn in the wrong place fails.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest

import raytrace_kit
from raytrace_kit import Report
from tests import helpers
from tests.helpers import shapes, tooltip

Scale = Callable[[float], float]


@pytest.fixture
def made(tmp_path: Path) -> Report:
    """The report of the known run."""
    helpers.write_known_run(tmp_path)
    return raytrace_kit.report(tmp_path)


@pytest.fixture
def pictures(made: Report, tmp_path: Path) -> dict[str, ElementTree.Element]:
    """The pictures of the report's page (``save_html``), parsed."""
    page = made.save_html(tmp_path / "report.html").read_text(encoding="utf-8")
    return helpers.pictures(page)


def axis(picture: ElementTree.Element, unit: str, log: bool = False) -> Scale:
    """Where a value lands, read off the picture's tick labels (``"2 s"``, ``"250 MiB"``)."""
    ticks = []
    for label in shapes(picture, "text"):
        found = re.fullmatch(rf"([\d.]+) ({unit})", label.text or "")
        if found:
            value = float(found.group(1)) * {"ms": 1e-3, "µs": 1e-6}.get(found.group(2), 1.0)
            position = "y" if unit == "MiB" else "x"
            ticks.append((math.log10(value) if log else value, float(label.get(position, ""))))
    (v0, p0), (v1, p1) = min(ticks), max(ticks)
    assert v1 > v0, ticks
    return lambda v: p0 + (p1 - p0) * ((math.log10(v) if log else v) - v0) / (v1 - v0)


def lane(picture: ElementTree.Element, pid: int) -> ElementTree.Element:
    """A process's lane in the task stream."""
    (found,) = (g for g in shapes(picture, "g", "lane") if g.get("data-pid") == str(pid))
    return found


def path_points(shape: ElementTree.Element) -> list[tuple[float, float]]:
    numbers = [float(n) for n in re.findall(r"-?[\d.]+", shape.get("d", ""))]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def band(row: ElementTree.Element) -> tuple[float, float]:
    """The vertical extent of a lane: its track, the first rectangle."""
    track = next(shapes(row, "rect"))
    top = float(track.get("y", ""))
    return top, top + float(track.get("height", ""))


class TestTaskStream:
    """Calls over time: each call where and when it ran, failures and deaths marked."""

    def test_the_failed_call_is_marked_in_its_process_lane_at_its_time(
        self, pictures: dict[str, ElementTree.Element]
    ) -> None:
        stream = pictures["task-stream"]
        x = axis(stream, "s")
        parse, fetch = lane(stream, 1001), lane(stream, 1002)
        (mark,) = shapes(parse, "path", "mark failure")
        points = path_points(mark)
        middle = sum(p[0] for p in points) / len(points)
        assert middle == pytest.approx(x(2.0), abs=1.0)  # it failed at 2.0 s
        top, bottom = band(parse)
        assert all(top - 2 <= p[1] <= bottom for p in points)
        assert "jobs.parse failed (ValueError) at 2.000 s" in tooltip(mark)
        (bar,) = shapes(parse, "rect", "call failed")
        left, width = float(bar.get("x", "")), float(bar.get("width", ""))
        assert (left, left + width) == (pytest.approx(x(1.5), abs=1), pytest.approx(x(2.0), abs=1))
        assert not list(shapes(fetch, kind="mark failure"))
        assert len(list(shapes(parse, "rect", "call ok"))) == 5

    def test_the_call_without_an_end_is_marked_where_it_started(
        self, pictures: dict[str, ElementTree.Element]
    ) -> None:
        stream = pictures["task-stream"]
        x = axis(stream, "s")
        parse = lane(stream, 1001)
        (mark,) = shapes(parse, "path", "mark kill")
        points = path_points(mark)
        assert sum(p[0] for p in points) / len(points) == pytest.approx(x(4.0), abs=1.0)
        assert tooltip(mark) == (
            "jobs.parse started at 4.000 s in pid 1001 and has no end: the process is gone; "
            "no Ray record says why"
        )
        assert not list(shapes(lane(stream, 1002), kind="mark kill"))

    def test_each_call_is_a_bar_from_its_start_to_its_end(
        self, pictures: dict[str, ElementTree.Element]
    ) -> None:
        stream = pictures["task-stream"]
        x = axis(stream, "s")
        bars = sorted(
            (float(b.get("x", "")), float(b.get("width", "")))
            for b in shapes(lane(stream, 1002), "rect", "call ok")
        )
        expected = [(0.0, 0.2), (0.3, 0.5), (0.6, 0.8), (0.9, 1.1), (1.2, 4.2), (4.3, 4.5)]
        assert [(left, left + width) for left, width in bars] == [
            (pytest.approx(x(a), abs=1), pytest.approx(x(b), abs=1)) for a, b in expected
        ]


class TestMemory:
    """Memory over time: each process's RSS, the leaking one highlighted."""

    def test_the_leaking_process_is_the_highlighted_line(
        self, pictures: dict[str, ElementTree.Element]
    ) -> None:
        chart = pictures["memory"]
        x, y = axis(chart, "s"), axis(chart, "MiB")
        assert y(300) < y(200)  # more memory is drawn higher
        (leak,) = shapes(chart, "polyline", "leak")
        (other,) = (p for p in shapes(chart, "polyline", "memory") if p is not leak)
        assert leak.get("data-pid") == "1002"
        assert other.get("data-pid") == "1001"
        assert float(leak.get("stroke-width", "")) > 2 * float(other.get("stroke-width", ""))
        assert leak.get("stroke") != other.get("stroke")
        points = [tuple(map(float, p.split(","))) for p in leak.get("points", "").split()]
        ends = [0.2, 0.5, 0.8, 1.1, 4.2, 4.5]  # each call's end, 16 MiB more each time
        assert points == [
            (pytest.approx(x(t), abs=1), pytest.approx(y(216 + 16 * i), abs=1))
            for i, t in enumerate(ends)
        ]
        flat = {round(float(p.split(",")[1])) for p in other.get("points", "").split()}
        assert flat == {round(y(100))}
        assert "Memory grows call after call: pid 1002" in tooltip(leak)
        legend = " ".join(t.text or "" for t in shapes(chart, "text"))
        assert "pid 1002: grows call after call (a leak)" in legend


class TestSpread:
    """Durations per function: the spread, the straggler marked and named."""

    def test_the_straggler_is_marked_and_named_with_its_duration(
        self, pictures: dict[str, ElementTree.Element]
    ) -> None:
        chart = pictures["spread"]
        x = axis(chart, "s|ms", log=True)
        rows = {g.get("data-function"): g for g in shapes(chart, "g", "function")}
        assert set(rows) == {"jobs.fetch", "jobs.parse"}
        (mark,) = shapes(rows["jobs.fetch"], "circle", "mark straggler")
        assert float(mark.get("cx", "")) == pytest.approx(x(3.0), abs=1)
        assert tooltip(mark) == (
            "A straggler of jobs.fetch: 3.00 s, 15x its median 200 ms "
            "(task b000000000000004, pid 1002)"
        )
        (median,) = shapes(rows["jobs.fetch"], "line", "median")
        assert float(median.get("x1", "")) == pytest.approx(x(0.2), abs=1)
        assert not list(shapes(rows["jobs.parse"], kind="mark straggler"))


class TestPage:
    """The pictures are in the page and the notebook card, escaped, and nothing else moves."""

    def test_the_card_and_the_page_hold_the_three_pictures(
        self, made: Report, tmp_path: Path
    ) -> None:
        assert set(helpers.pictures(made._repr_html_())) == {"task-stream", "memory", "spread"}
        page = made.save_html(tmp_path / "report.html").read_text(encoding="utf-8")
        assert set(helpers.pictures(page)) == {"task-stream", "memory", "spread"}
        assert "<script" not in page
        assert not re.findall(r"(?:src|href)=|url\(|@import", page)  # nothing to fetch
        assert "<svg" not in str(made)  # the text report is text

    def test_names_that_look_like_markup_are_escaped(self, tmp_path: Path) -> None:
        events = helpers.EventFile(tmp_path, 1001)
        for index in range(6):
            events.start(f"c{index}", "jobs.<script>alert('x')</script>&more")
            events.end(f"c{index}", ValueError("<b>bad</b>"), seconds=0.1)
        events.close()
        page = raytrace_kit.report(tmp_path)._repr_html_()
        assert "<script" not in page
        assert "<b>bad" not in page
        assert "jobs.&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;more" in page
        assert set(helpers.pictures(page)) == {"task-stream", "memory", "spread"}

    def test_the_charts_data_is_plain_json(self, made: Report) -> None:
        import json  # noqa: PLC0415

        data = json.loads(json.dumps(made.to_dict()))
        (leaking,) = (lane for lane in data["charts"]["lanes"] if lane["leak"])
        assert leaking["pid"] == 1002
        assert data["charts"]["span_s"] == pytest.approx(4.5)
