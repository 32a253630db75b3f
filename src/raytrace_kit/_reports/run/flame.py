"""The report's flame graph of the sampled run: where the busiest functions' time went, as SVG.

:func:`flame_data` folds the running samples into a tree (bounded: the busiest calls'
functions at the root, frames narrower than :data:`MIN_SHARE` of the whole dropped,
:data:`MAX_DEPTH` levels), kept in the report's ``charts``; :func:`flame_graph` draws it
with the pictures' vocabulary (``svg.py``): one row per depth, the callers on top (an
icicle, as speedscope's "left heavy"), from the user's outermost frame (Ray's worker
loop left out), widths in seconds of samples, each frame's
``<title>`` naming it with its ``file:line`` and its share. No script: it renders offline.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from raytrace_kit._html import element
from raytrace_kit._reports.profiles.samples import SampleRow, from_users_code
from raytrace_kit._reports.run import svg
from raytrace_kit._reports.run.svg import RIGHT, TOP, WIDTH

__all__ = ["MAX_DEPTH", "MIN_SHARE", "flame_data", "flame_graph"]

MIN_SHARE = 0.01  # frames narrower than this share of all running samples are not kept
MAX_DEPTH = 24
ROOTS = 8  # the busiest functions drawn; the rest are one "other functions" frame
_ROW = 17


def _root_name(row: SampleRow) -> str:
    if row.function is not None:
        return row.function
    if row.driver is not None:
        return f"driver ({Path(row.driver).name})"
    return "no call (threads outside instrumented calls)"


def flame_data(rows: list[SampleRow]) -> dict[str, Any] | None:
    """The running samples as a tree: ``{"name", "where", "s", "children"}``; ``None``: none.

    The root's children are the functions of the calls the samples belong to (a driver's
    script, "no call"), the busiest first; below each, its stacks' frames from the
    outermost frame of the user's code in (Ray's worker loop above it says nothing).
    ``where`` is a frame's ``file:line``.
    """
    running = [row for row in rows if not row.waiting and row.stack]
    total = sum(row.seconds for row in running)
    if not total:
        return None
    root: dict[str, Any] = {"name": "all", "where": "", "s": 0.0, "children": {}}
    for row in running:
        root["s"] += row.seconds
        node = _child(root, _root_name(row), "")
        node["s"] += row.seconds
        for frame in from_users_code(row.stack)[:MAX_DEPTH]:
            node = _child(node, frame.name, f"{frame.file}:{frame.line}")
            node["s"] += row.seconds
    kept = _pruned(root, total * MIN_SHARE)
    children = kept["children"]
    if len(children) > ROOTS:  # the busiest functions, and the rest summed
        rest = children[ROOTS:]
        others = {"name": f"{len(rest)} other functions", "where": "", "children": []}
        children[ROOTS:] = [{**others, "s": sum(c["s"] for c in rest)}]
    return kept


def _child(node: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    children = node["children"]
    found = children.get((name, where))
    if found is None:
        found = children[name, where] = {"name": name, "where": where, "s": 0.0, "children": {}}
    return found  # type: ignore[no-any-return]  # the tree's own dicts


def _pruned(node: dict[str, Any], floor: float) -> dict[str, Any]:
    """The tree as lists, the widest first, without frames narrower than ``floor``."""
    children = sorted(node["children"].values(), key=lambda c: -c["s"])
    return {
        "name": node["name"],
        "where": node["where"],
        "s": round(node["s"], 4),
        "children": [_pruned(child, floor) for child in children if child["s"] >= floor],
    }


def _colour(name: str, where: str) -> str:
    """A warm colour that stays a frame's own from one report to the next."""
    digest = hashlib.blake2b(f"{name} {where}".encode(), digest_size=2).digest()
    return f"hsl({10 + digest[0] % 40},{70 + digest[1] % 20}%,{58 + digest[0] % 12}%)"


def flame_graph(charts: dict[str, Any]) -> str:
    """The flame graph of ``charts["flame"]`` (empty without samples)."""
    tree = charts.get("flame")
    if not tree or not tree.get("s"):
        return ""
    total = float(tree["s"])
    scale = (WIDTH - RIGHT - 8) / total  # the whole width: no names in a margin
    boxes: list[str] = []
    deepest = _draw(tree["children"], 8.0, 0, scale, total, boxes)
    bottom = TOP + (deepest + 1) * _ROW + 6
    note = (
        f"{total:.1f} s of running samples; the busiest functions on top, each frame as wide "
        "as the time under it (hover a frame for its file:line)"
    )
    parts = [svg.text(8, 38, note, font_style="italic"), *boxes]
    return svg.frame("flame-graph", "Where the sampled time went (flame graph)", bottom, *parts)


def _draw(  # noqa: PLR0917 -- one recursion's state
    nodes: list[dict[str, Any]],
    x: float,
    depth: int,
    scale: float,
    total: float,
    boxes: list[str],
) -> int:
    """Draw ``nodes`` side by side at ``depth``, their children under them; the deepest row."""
    deepest = depth
    y = TOP + depth * _ROW
    for node in nodes:
        width = node["s"] * scale
        where = f" ({node['where']})" if node["where"] else ""
        title = f"{node['name']}{where}: {node['s']:.2f} s, {node['s'] / total:.0%} of the samples"
        label = _fits(node["name"] + (f" {Path(node['where']).name}" if where else ""), width)
        boxes.append(
            element(
                "g",
                element(
                    "rect",
                    x=svg.n(x),
                    y=svg.n(y),
                    width=svg.n(max(width - 1, 0.5)),
                    height=_ROW - 1,
                    fill=_colour(node["name"], node["where"]),
                ),
                svg.text(x + 3, y + 12, label, font_size=10, fill="#222") if label else "",
                title=title,
                class_="flame-frame",
                data_where=node["where"],
            )
        )
        deepest = max(deepest, _draw(node["children"], x, depth + 1, scale, total, boxes))
        x += width
    return deepest


def _fits(label: str, width: float) -> str:
    """``label`` cut to what ``width`` pixels hold at 10px (empty when nothing does)."""
    chars = int((width - 6) / 5.6)
    if chars >= len(label):
        return label
    return label[: chars - 1] + "…" if chars >= 4 else ""
