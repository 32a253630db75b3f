"""The timeline: a run's calls as a Chrome trace / Perfetto file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.timeline.trace import _trace, timeline

__all__ = [
    "_trace",
    "timeline",
]

__getattr__ = lazy_names(
    __name__,
    {
        "trace": ("_trace", "timeline"),
    },
)
