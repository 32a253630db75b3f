"""The report's pictures, as inline SVG: calls over time, memory over time, and the others.

Each picture is drawn from the report's ``charts`` data (bounded aggregates of the same
pass that made the tables: ``lanes.py``, ``spread.py``), with a title, labelled axes and
a legend (``svg.py``); every shape a reader may ask about carries a ``<title>`` tooltip.
No script, no font or file fetched: the page renders offline. Times are seconds from the
run's start, memory is MiB. Durations are drawn in ``spread_chart.py``, the flame graph in
``flame.py``; :func:`pictures` lists them all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from raytrace_kit._html import element
from raytrace_kit._reports.run import svg
from raytrace_kit._reports.run.flame import flame_graph
from raytrace_kit._reports.run.spread_chart import spreads
from raytrace_kit._reports.run.svg import FAILED, LEAK, LEFT, OK, OTHER, RIGHT, ROW, TOP, WIDTH

__all__ = ["memory", "pictures", "task_stream"]

_MIB = 2**20


def pictures(charts: dict[str, Any]) -> list[str]:
    """The pictures the data has something for (each an ``<svg>`` element)."""
    drawn = [task_stream(charts), memory(charts), spreads(charts), flame_graph(charts)]
    return [picture for picture in drawn if picture]


def task_stream(charts: dict[str, Any]) -> str:
    """Calls over time, one lane per process, failures and calls without an end marked."""
    lanes: list[dict[str, Any]] = charts.get("lanes") or []
    if not lanes:
        return ""
    span, x = svg.timeline(charts)
    rows = []
    for index, lane in enumerate(lanes):
        rows.append(_lane(lane, TOP + index * ROW, x))
    bottom = TOP + len(lanes) * ROW + 4
    legend = [
        (svg.bar(OK), "a call (ok)"),
        (svg.bar(FAILED) + svg.triangle(6, -7), "failed"),
        (svg.cross(6, 0), "no end: its process died"),
    ]
    if any(lane["calls_per_point"] > 1 for lane in lanes):
        legend.append((svg.bar(OK, 0.4), "many calls: the darker, the busier"))
    parts = [svg.legend(legend), *rows, svg.time_axis(x, span, bottom)]
    more = charts.get("lanes_not_drawn") or 0
    if more:
        note = f"and {more} more processes, not drawn: the troubled and busiest are"
        parts.append(svg.text(8, bottom + 46, note, font_style="italic"))
    return svg.frame(
        "task-stream", "Calls over time, per process", bottom + 38 + 16 * bool(more), *parts
    )


def _lane(lane: dict[str, Any], y: float, x: Callable[[float], float]) -> str:
    """One process's row: its name, its calls (or stretches of calls), its marks."""
    name = f"pid {lane['pid']} · {lane['node'][:8]}" if lane["node"] else f"pid {lane['pid']}"
    about = (
        f"pid {lane['pid']} on node {lane['node'] or '?'}: {lane['calls']} calls, "
        f"{lane['failure_count']} failed, {lane['kill_count']} without an end"
    )
    if lane["calls_per_point"] > 1:
        about += f" (a mark sums up to {lane['calls_per_point']} calls)"
    height, middle = ROW - 6, y + (ROW - 6) / 2
    parts = [
        svg.text(LEFT - 8, middle + 4, name, text_anchor="end", title=about, class_="lane-name"),
        element(
            "rect",
            x=LEFT,
            y=svg.n(y),
            width=WIDTH - LEFT - RIGHT,
            height=height,
            fill="#7f7f7f",
            fill_opacity=0.08,
        ),
    ]
    functions = lane.get("functions")
    previous: float | None = None
    for index, (end, calls, busy, failed, _) in enumerate(lane["points"]):
        if functions is not None:  # a point is one call: a bar from its start to its end
            start, opacity = end - busy, 1.0
            words = f"{functions[index]}: {busy:.3f} s, {'failed' if failed else 'ok'}"
            words += f", from {start:.3f} s to {end:.3f} s"
            kind = "call failed" if failed else "call ok"
        else:  # a stretch of calls: shaded by the share of it they ran
            start = previous if previous is not None else end - busy
            share = busy / (end - start) if end > start else 1.0
            opacity = min(max(share, 0.15), 1.0)
            words = f"{calls} calls from {start:.2f} s to {end:.2f} s, {failed} failed, "
            words += f"busy {min(share, 1.0):.0%} of it"
            kind = "calls"
        left = x(start)
        parts.append(
            element(
                "rect",
                x=svg.n(left),
                y=svg.n(y + 2),
                width=svg.n(max(x(end) - left, 1.0)),
                height=height - 4,
                fill=FAILED if failed and functions is not None else OK,
                fill_opacity=opacity,
                class_=kind,
                title=words,
            )
        )
        previous = end
    for at, function, error in lane["failures"]:
        words = f"{function} failed ({error}) at {at:.3f} s, pid {lane['pid']}"
        parts.append(svg.triangle(x(at), y - 1, words, class_="mark failure"))
    for at, function, cause in lane["kills"]:
        words = f"{function} started at {at:.3f} s in pid {lane['pid']} and has no end: {cause}"
        parts.append(svg.cross(x(at), middle, words, class_="mark kill"))
    return element("g", *parts, class_="lane", data_pid=lane["pid"])


def memory(charts: dict[str, Any]) -> str:
    """Each process's RSS at the end of its calls over time; the leaking one highlighted."""
    lines: list[tuple[dict[str, Any], list[tuple[float, float]]]] = [
        (lane, [(float(p[0]), p[4] / _MIB) for p in lane["points"] if p[4] is not None])
        for lane in charts.get("lanes") or []
    ]
    lines = [(lane, points) for lane, points in lines if points]
    if not lines:
        return ""
    span, x = svg.timeline(charts)
    low = min(mib for _, points in lines for _, mib in points)
    high = max(mib for _, points in lines for _, mib in points)
    step = svg.round_step(max(high - low, 1.0), 4)
    # A step of room under the lowest line: a flat process does not hide in the axis.
    low, high = max(math.ceil(low / step) - 1, 0) * step, math.ceil(high / step) * step
    high = max(high, low + step)
    height = 180

    def y(mib: float) -> float:
        return TOP + height * (high - mib) / (high - low)

    parts = _memory_axis(low, high, step, height, y)
    lines.sort(key=lambda item: bool(item[0]["leak"]))  # the leaking on top
    for lane, points in lines:
        parts.extend(_memory_line(lane, points, x, y))
    parts.insert(0, _memory_legend([lane for lane, _ in lines if lane["leak"]]))
    parts.append(svg.time_axis(x, span, TOP + height + 4))
    return svg.frame("memory", "Memory over time, per process", TOP + height + 44, *parts)


def _memory_axis(
    low: float, high: float, step: float, height: float, y: Callable[[float], float]
) -> list[str]:
    """The memory axis: its line, a level every ``step`` MiB, its label."""
    parts = [element("line", x1=LEFT, x2=LEFT, y1=TOP, y2=TOP + height, stroke="#999")]
    for index in range(round((high - low) / step) + 1):
        level = low + index * step
        parts.append(
            element(
                "line",
                x1=LEFT,
                x2=WIDTH - RIGHT,
                y1=svg.n(y(level)),
                y2=svg.n(y(level)),
                stroke="#7f7f7f",
                stroke_opacity=0.2,
            )
        )
        parts.append(
            svg.text(
                LEFT - 6, y(level), f"{level:g} MiB", text_anchor="end", dominant_baseline="middle"
            )
        )
    label = "RSS at the end of calls (MiB)"
    middle = TOP + height / 2
    parts.append(
        svg.text(90, middle, label, text_anchor="middle", transform=f"rotate(-90 90 {middle})")
    )
    return parts


def _memory_line(
    lane: dict[str, Any],
    points: list[tuple[float, float]],
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> list[str]:
    """One process's line (a leak's thick, its calls' points shown), with its tooltip."""
    leaking = bool(lane["leak"])
    words = (
        f"pid {lane['pid']} on node {lane['node'] or '?'}: {points[0][1]:.0f} MiB at "
        f"{points[0][0]:.2f} s, {points[-1][1]:.0f} MiB at {points[-1][0]:.2f} s, at most "
        f"{max(mib for _, mib in points):.0f} MiB" + (f". {lane['leak']}" if leaking else "")
    )
    coordinates = " ".join(f"{svg.n(x(t))},{svg.n(y(mib))}" for t, mib in points)
    parts = [
        element(
            "polyline",
            points=coordinates,
            fill="none",
            stroke=LEAK if leaking else OTHER,
            stroke_width=3 if leaking else 1.2,
            stroke_linejoin="round",
            title=words,
            class_="memory leak" if leaking else "memory",
            data_pid=lane["pid"],
        )
    ]
    if len(points) == 1 or leaking:  # a lone point shows; a leak's calls show one by one
        parts.extend(
            element(
                "circle",
                cx=svg.n(x(t)),
                cy=svg.n(y(mib)),
                r=2.5 if leaking else 2,
                fill=LEAK if leaking else OTHER,
            )
            for t, mib in points
        )
    return parts


def _memory_legend(leaks: list[dict[str, Any]]) -> str:
    """Other processes' line, and each leaking process's."""
    swatch = element("line", x1=0, x2=12, y1=0, y2=0, stroke=OTHER, stroke_width=1.2)
    legend = [(swatch, "other processes" if leaks else "a process, one line each")]
    for lane in leaks:
        swatch = element("line", x1=0, x2=12, y1=0, y2=0, stroke=LEAK, stroke_width=3)
        legend.append((swatch, f"pid {lane['pid']}: grows call after call (a leak)"))
    return svg.legend(legend)
