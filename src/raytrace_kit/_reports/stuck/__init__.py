"""Stuck and wait-for: the calls in flight, what each waits on, the deadlocks, as text and HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.stuck.frame_words import user_where
    from raytrace_kit._reports.stuck.inflight import in_flight, started_or_ended
    from raytrace_kit._reports.stuck.render import headline
    from raytrace_kit._reports.stuck.report import UNMOVED_S, StuckReport, build
    from raytrace_kit._reports.stuck.waitfor import Flight

__all__ = [
    "UNMOVED_S",
    "Flight",
    "StuckReport",
    "build",
    "headline",
    "in_flight",
    "started_or_ended",
    "user_where",
]

__getattr__ = lazy_names(
    __name__,
    {
        "frame_words": ("user_where",),
        "inflight": ("in_flight", "started_or_ended"),
        "render": ("headline",),
        "report": ("StuckReport", "UNMOVED_S", "build"),
        "waitfor": ("Flight",),
    },
)
