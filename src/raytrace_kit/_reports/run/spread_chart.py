"""The report's picture of durations, as inline SVG: each function's calls on a log scale.

One row per function (``spread.py`` chose them and binned their durations): a histogram
of its calls, the box of the middle half and the median, each straggler a dot with a
tooltip that says how far beyond the median it ran (``charts.py`` draws the others).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from raytrace_kit._html import element
from raytrace_kit._reports.run import svg
from raytrace_kit._reports.run.spread import BINS_PER_DECADE
from raytrace_kit._reports.run.svg import FAILED, LEFT, OK, RIGHT, ROW, TOP, WIDTH

__all__ = ["spreads"]


def spreads(charts: dict[str, Any]) -> str:
    """Each function's call durations on a log scale, its stragglers marked and named."""
    rows: list[dict[str, Any]] = charts.get("spreads") or []
    if not rows:
        return ""
    first: int = min(row["bins"][0][0] for row in rows) // BINS_PER_DECADE
    last: int = max(row["bins"][-1][0] for row in rows) // BINS_PER_DECADE + 1
    width = WIDTH - LEFT - RIGHT

    def x(seconds: float) -> float:
        decades = math.log10(max(seconds, 1e-6))
        return LEFT + width * (decades - first) / (last - first)

    parts = []
    for index, row in enumerate(rows):
        parts.append(_spread(row, TOP + index * ROW, x))
    bottom = TOP + len(rows) * ROW + 4
    axis = [element("line", x1=LEFT, x2=WIDTH - RIGHT, y1=bottom, y2=bottom, stroke="#999")]
    for decade in range(first, last + 1):
        at = x(10.0**decade)
        axis.append(
            element(
                "line",
                x1=svg.n(at),
                x2=svg.n(at),
                y1=TOP - 4,
                y2=bottom + 4,
                stroke="#7f7f7f",
                stroke_opacity=0.2,
            )
        )
        axis.append(svg.text(at, bottom + 15, svg.duration(10.0**decade), text_anchor="middle"))
    middle = (LEFT + WIDTH - RIGHT) / 2
    axis.append(svg.text(middle, bottom + 30, "call duration (log scale)", text_anchor="middle"))
    box = element("rect", x=0, y=-5, width=12, height=10, fill="none", stroke="currentColor")
    median = element("line", x1=6, x2=6, y1=-6, y2=6, stroke="currentColor", stroke_width=2.5)
    legend = [
        (svg.bar(OK, 0.35), "calls that took that long"),
        (box, "the middle half"),
        (median, "median"),
        (element("circle", cx=6, cy=0, r=4, fill=FAILED), "a straggler"),
    ]
    rule = charts.get("straggler_rule")
    if rule:
        legend[-1] = (legend[-1][0], f"a straggler: {rule}")
    parts = [svg.legend(legend), element("g", *axis, class_="axis duration"), *parts]
    return svg.frame("spread", "How long calls took, per function", bottom + 38, *parts)


def _spread(row: dict[str, Any], y: float, x: Callable[[float], float]) -> str:
    """One function's row: the histogram, the middle half and median, the stragglers."""
    function, (q1, median, q3) = row["function"], row["quartiles_s"]
    about = (
        f"{function}: {row['count']} calls, median {svg.duration(median)}, middle half "
        f"{svg.duration(q1)} to {svg.duration(q3)}, 95% under {svg.duration(row['p95_s'])}"
    )
    middle, height = y + (ROW - 6) / 2, ROW - 6
    parts = [
        svg.text(
            LEFT - 8,
            middle + 4,
            svg.short(function),
            text_anchor="end",
            title=about,
            class_="function-name",
        )
    ]
    parts.extend(_bins(row, middle, height, x))
    parts.extend(_middle_half(row, middle, x, about))
    parts.extend(_straggler_marks(row, middle, x))
    return element("g", *parts, class_="function", data_function=function)


def _bins(
    row: dict[str, Any], middle: float, height: float, x: Callable[[float], float]
) -> list[str]:
    """The histogram of a function's durations: one bar per bin, as tall as its calls."""
    function = row["function"]
    parts = []
    most = max(calls for _, calls in row["bins"])
    for k, calls in row["bins"]:
        low, high = 10 ** (k / BINS_PER_DECADE), 10 ** ((k + 1) / BINS_PER_DECADE)
        tall = max(height * calls / most, 1.5)
        words = f"{calls} calls of {function} took {svg.duration(low)} to {svg.duration(high)}"
        parts.append(
            element(
                "rect",
                x=svg.n(x(low)),
                y=svg.n(middle - tall / 2),
                width=svg.n(max(x(high) - x(low) - 0.5, 1.0)),
                height=svg.n(tall),
                fill=OK,
                fill_opacity=0.35,
                title=words,
                class_="bin",
            )
        )
    return parts


def _middle_half(
    row: dict[str, Any], middle: float, x: Callable[[float], float], about: str
) -> list[str]:
    """The box of the middle half of the durations, and the median's line across it."""
    q1, median, q3 = row["quartiles_s"]
    return [
        element(
            "rect",
            x=svg.n(x(q1)),
            y=svg.n(middle - 5),
            width=svg.n(max(x(q3) - x(q1), 1)),
            height=10,
            fill="none",
            stroke="currentColor",
            class_="quartiles",
            title=about,
        ),
        element(
            "line",
            x1=svg.n(x(median)),
            x2=svg.n(x(median)),
            y1=svg.n(middle - 7),
            y2=svg.n(middle + 7),
            stroke="currentColor",
            stroke_width=2.5,
            class_="median",
        ),
    ]


def _straggler_marks(row: dict[str, Any], middle: float, x: Callable[[float], float]) -> list[str]:
    """Each straggler's dot, with its tooltip; the first one's time written beside it."""
    function, median = row["function"], row["quartiles_s"][1]
    parts = []
    for index, (took, where) in enumerate(row["stragglers"]):
        words = (
            f"A straggler of {function}: {took:.2f} s, {took / max(median, 1e-9):.0f}x its "
            f"median {svg.duration(median)}" + (f" ({where})" if where else "")
        )
        parts.append(
            element(
                "circle",
                cx=svg.n(x(took)),
                cy=svg.n(middle),
                r=4,
                fill=FAILED,
                stroke="white",
                stroke_width=0.5,
                title=words,
                class_="mark straggler",
            )
        )
        if index == 0:
            parts.append(
                svg.text(
                    x(took) - 7,
                    middle + 4,
                    f"{took:.2f} s",
                    text_anchor="end",
                    fill=FAILED,
                    font_weight="bold",
                )
            )
    return parts
