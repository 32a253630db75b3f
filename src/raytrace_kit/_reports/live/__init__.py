"""The live views: record files followed as they grow, their aggregates, top's merged view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.live.aggregates import OLDEST, LiveTally, bin_value
    from raytrace_kit._reports.live.cursor import RECORD_FILE, Cursor
    from raytrace_kit._reports.live.samples import LiveSamples, hot_lines, merge_hot_lines
    from raytrace_kit._reports.live.top import TopView, renderable
    from raytrace_kit._reports.live.top_merge import merge

__all__ = [
    "OLDEST",
    "RECORD_FILE",
    "Cursor",
    "LiveSamples",
    "LiveTally",
    "TopView",
    "bin_value",
    "hot_lines",
    "merge",
    "merge_hot_lines",
    "renderable",
]

__getattr__ = lazy_names(
    __name__,
    {
        "aggregates": ("LiveTally", "OLDEST", "bin_value"),
        "cursor": ("Cursor", "RECORD_FILE"),
        "samples": ("LiveSamples", "hot_lines", "merge_hot_lines"),
        "top": ("TopView", "renderable"),
        "top_merge": ("merge",),
    },
)
