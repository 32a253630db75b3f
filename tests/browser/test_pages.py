"""The HTML report and a memray flame graph, rendered by headless Chromium, offline.

Each page renders with no error in its console (see the probe in ``conftest.py``) and
shows its pictures: the report's three charts with their marks, laid out in the page;
the flame graph's frames, named after the code that allocated.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from xml.etree import ElementTree

import memray

import raytrace_kit
from tests import helpers
from tests.browser.conftest import Browser
from tests.helpers import shapes


def _box(shape: ElementTree.Element) -> tuple[float, float, float, float]:
    """The box the probe measured for a shape in the rendered page (x, y, width, height)."""
    x, y, width, height = (float(v) for v in shape.get("data-probe-box", "").split(","))
    return x, y, width, height


def _inside(inner: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    return (
        outer[0] - 1 <= inner[0]
        and inner[0] + inner[2] <= outer[0] + outer[2] + 1
        and outer[1] - 1 <= inner[1]
        and inner[1] + inner[3] <= outer[1] + outer[3] + 1
    )


class TestTheProbe:
    """The console check catches a broken page: it is what the other tests rely on."""

    def test_a_broken_page_is_caught(self, browser: Browser, tmp_path: Path) -> None:
        page = tmp_path / "broken.html"
        page.write_text(
            '<!doctype html><html><head><meta charset="utf-8"></head><body><p>hello</p>'
            "<script>console.error('deliberate', 42);</script>"
            "<script>Promise.reject('no reason');</script>"
            "<script>undefinedFunction();</script>"
            '<img src="https://example.com/fetched-at-view-time.png">'
            "</body></html>",
            encoding="utf-8",
        )
        errors = browser.render(page).errors
        assert "console.error deliberate 42" in errors
        assert "unhandled rejection no reason" in errors
        assert any(e.startswith("uncaught") and "undefinedFunction" in e for e in errors)
        assert "failed to load https://example.com/fetched-at-view-time.png" in errors

    def test_a_clean_page_passes(self, browser: Browser, tmp_path: Path) -> None:
        page = tmp_path / "clean.html"
        page.write_text("<!doctype html><html><head></head><body><p>hi</p></body></html>")
        assert browser.render(page).errors == []


class TestReportPage:
    """save_html(): the three pictures render, marks and all, with no console error."""

    def test_the_pictures_render_with_their_marks(self, browser: Browser, tmp_path: Path) -> None:
        helpers.write_known_run(tmp_path / "run")
        page = raytrace_kit.report(tmp_path / "run").save_html(tmp_path / "report.html")
        rendered = browser.render(page)
        assert rendered.errors == []
        pictures = helpers.pictures(rendered.dom)
        assert set(pictures) == {"task-stream", "memory", "spread"}
        for kind, picture in pictures.items():
            _, _, width, height = _box(picture)
            assert width > 500, kind
            assert height > 100, kind
        stream = pictures["task-stream"]
        for kind in ("mark failure", "mark kill"):
            (mark,) = shapes(stream, "path", kind)
            box = _box(mark)
            assert box[2] > 0, kind
            assert _inside(box, _box(stream)), kind
        (leak,) = shapes(pictures["memory"], "polyline", "memory leak")
        assert leak.get("data-pid") == "1002"
        (straggler,) = shapes(pictures["spread"], "circle", "mark straggler")
        box = _box(straggler)
        assert box[2] > 0
        assert _inside(box, _box(pictures["spread"]))


def _allocate_rows() -> list[bytearray]:
    return [bytearray(200_000) for _ in range(50)]


class TestFlameGraphPage:
    """flamegraph(): memray's page renders offline, its frames drawn, with no console error."""

    def test_a_capture_renders_its_frames(self, browser: Browser, tmp_path: Path) -> None:
        capture = tmp_path / "capture.bin"
        with memray.Tracker(capture):
            rows = _allocate_rows()
        assert len(rows) == 50
        page = raytrace_kit.flamegraph(capture, tmp_path / "flamegraph.html")
        rendered = browser.render(Path(page))
        assert rendered.errors == []
        frames = {
            name: box
            for attributes in re.findall(r"<g\b([^>]*\bclass=\"frame\"[^>]*)>", rendered.dom)
            for name, box in [_frame(attributes)]
        }
        # memray names a frame by its line of code: the call here, the allocation in it.
        site = "return [bytearray(200_000) for _ in range(50)]"
        assert {"rows = _allocate_rows()", site} <= set(frames), sorted(frames)
        assert frames[site][2] > 100  # all the allocations: most of the width


def _frame(attributes: str) -> tuple[str, tuple[float, float, float, float]]:
    """A flame graph frame's name and its rendered box, from its tag's attributes."""
    found = dict(re.findall(r'([\w-]+)="([^"]*)"', attributes))
    x, y, width, height = (float(v) for v in found.get("data-probe-box", "0,0,0,0").split(","))
    return html.unescape(found.get("name", "")).strip(), (x, y, width, height)
