"""The vocabulary of the report's pictures: a titled SVG frame, text, legends, axes, marks.

One geometry for all pictures (``WIDTH`` wide, names in the ``LEFT`` margin), so their
time axes line up on the page. Every attribute and text is escaped (``_html.element``);
fonts are the reader's own, nothing is fetched.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

from raytrace_kit._html import element

__all__ = [
    "FAILED", "LEAK", "LEFT", "OK", "OTHER", "RIGHT", "ROW", "TOP", "WIDTH", "bar", "cross",
    "duration", "frame", "legend", "n", "round_step", "short", "text", "time_axis", "timeline",
    "triangle",
]  # fmt: skip

WIDTH = 760
LEFT, RIGHT = 170, 24  # room for the lanes' names, and for the last tick's label
TOP = 58  # the title and the legend
ROW = 22  # a lane or a function
OK, FAILED, LEAK, OTHER = "#5b7bd5", "#d62728", "#d62728", "#8e9bbd"
_FONT = "system-ui,-apple-system,'Segoe UI',sans-serif"  # the reader's own fonts: none fetched
_CHAR = 6.2  # about how wide a character of the 11px font is, to lay the legend out


def text(x: float, y: float, content: str, title: str = "", **attributes: object) -> str:
    """A text at (``x``, ``y``), escaped; ``title`` its tooltip."""
    return element("text", html.escape(content), title=title, x=n(x), y=n(y), **attributes)


def n(value: float) -> str:
    """A coordinate as an attribute says it: a tenth of a pixel is enough."""
    return f"{value:.1f}"


def frame(kind: str, title: str, height: float, *children: str) -> str:
    """A picture: its title drawn on top, and as its accessible name."""
    return element(
        "svg",
        text(8, 18, title, font_weight="bold", font_size=13),
        *children,
        title=title,
        xmlns="http://www.w3.org/2000/svg",
        class_=f"raytrace-kit-chart {kind}",
        viewBox=f"0 0 {WIDTH} {height:.0f}",
        width=WIDTH,
        height=f"{height:.0f}",
        role="img",
        font_family=_FONT,
        font_size=11,
        fill="currentColor",
        style="max-width:100%;height:auto;display:block;margin:8px 0",
    )


def legend(items: list[tuple[str, str]], y: float = 38) -> str:
    """Swatches and their words, in a row under the title (``items``: swatch at (0, 0))."""
    parts, x = [], 8.0
    for swatch, words in items:
        parts.append(element("g", swatch, transform=f"translate({n(x)},{n(y)})"))
        parts.append(text(x + 18, y + 4, words))
        x += 30 + _CHAR * len(words)
    return element("g", *parts, class_="legend")


def round_step(span: float, ticks: int = 6) -> float:
    """A round step (1, 2 or 5 times a power of ten) that cuts ``span`` in about ``ticks``."""
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def time_axis(scale: Callable[[float], float], span: float, y: float) -> str:
    """The time axis under a plot: ticks in seconds from the run's start, and its label."""
    step = round_step(span)
    digits = max(0, -math.floor(math.log10(step)))
    parts = [element("line", x1=LEFT, x2=WIDTH - RIGHT, y1=n(y), y2=n(y), stroke="#999")]
    for index in range(int(span / step + 1e-9) + 1):
        x = scale(index * step)
        parts.append(element("line", x1=n(x), x2=n(x), y1=n(y), y2=n(y + 4), stroke="#999"))
        parts.append(text(x, y + 15, f"{index * step:.{digits}f} s", text_anchor="middle"))
    middle = (LEFT + WIDTH - RIGHT) / 2
    parts.append(text(middle, y + 30, "time from the run's start (s)", text_anchor="middle"))
    return element("g", *parts, class_="axis time")


def timeline(charts: dict[str, Any]) -> tuple[float, Callable[[float], float]]:
    """The run's span, and where a time (s from the run's start) is across a plot."""
    span = max(float(charts.get("span_s") or 0.0), 1e-3)
    width = WIDTH - LEFT - RIGHT
    return span, lambda t: LEFT + width * min(max(t / span, 0.0), 1.0)


def short(name: str, chars: int = 26) -> str:
    """A name cut to fit the margin, keeping its end (the function, not the module)."""
    return name if len(name) <= chars else "…" + name[-(chars - 1) :]


def bar(colour: str, opacity: float = 1.0) -> str:
    """A legend's swatch: a small rectangle."""
    return element("rect", x=0, y=-5, width=12, height=10, fill=colour, fill_opacity=opacity)


def triangle(x: float, y: float, title: str = "", **attributes: object) -> str:
    """A failure's mark: a red triangle pointing down at ``x``, its top at ``y``."""
    d = f"M{n(x - 4)},{n(y)} L{n(x + 4)},{n(y)} L{n(x)},{n(y + 7)} Z"
    return element(
        "path", d=d, fill=FAILED, stroke="white", stroke_width=0.5, title=title, **attributes
    )


def cross(x: float, y: float, title: str = "", **attributes: object) -> str:
    """The mark of a call that never ended: a cross centred on (``x``, ``y``)."""
    left, right, up, down = n(x - 4), n(x + 4), n(y - 4), n(y + 4)
    d = f"M{left},{up} L{right},{down} M{left},{down} L{right},{up}"
    return element(
        "path", d=d, stroke="currentColor", stroke_width=2.2, fill="none", title=title, **attributes
    )


def duration(seconds: float) -> str:
    """``0.2`` as ``200 ms``: a duration in the unit that reads best."""
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= size:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
