"""Reading what a run wrote: sessions, their files and calls, events, the driver's record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.reading.calls import (
        Call,
        Piece,
        StartLine,
        chunks,
        distinct_processes,
        iter_calls,
        processes,
    )
    from raytrace_kit._reports.reading.columns import (
        Clock,
        Stamps,
        column_loops,
        decode_submission,
        first_rows,
        grouped,
        looked_up,
        read_stamp,
        reduced,
    )
    from raytrace_kit._reports.reading.counts import Counts, count, has_submissions
    from raytrace_kit._reports.reading.driver import DriverRecord
    from raytrace_kit._reports.reading.events import read_events
    from raytrace_kit._reports.reading.header import (
        cluster_line,
        cluster_listing,
        counted,
        session_line,
    )
    from raytrace_kit._reports.reading.running import (
        KIT_RUN_VALUED,
        Cluster,
        RayNode,
        clusters,
        driver_logs,
        ray_processes,
        script_from_argv,
        script_of,
        shown_script,
    )
    from raytrace_kit._reports.reading.session import Session, flush_own, instant, open_session
    from raytrace_kit._reports.reading.session_list import (
        Choice,
        SessionSummary,
        choose_latest,
        sessions,
        summarize,
    )
    from raytrace_kit._reports.reading.session_table import sessions_line

__all__ = [
    "KIT_RUN_VALUED",
    "Call",
    "Choice",
    "Clock",
    "Cluster",
    "Counts",
    "DriverRecord",
    "Piece",
    "RayNode",
    "Session",
    "SessionSummary",
    "Stamps",
    "StartLine",
    "choose_latest",
    "chunks",
    "cluster_line",
    "cluster_listing",
    "clusters",
    "column_loops",
    "count",
    "counted",
    "decode_submission",
    "distinct_processes",
    "driver_logs",
    "first_rows",
    "flush_own",
    "grouped",
    "has_submissions",
    "instant",
    "iter_calls",
    "looked_up",
    "open_session",
    "processes",
    "ray_processes",
    "read_events",
    "read_stamp",
    "reduced",
    "script_from_argv",
    "script_of",
    "session_line",
    "sessions",
    "sessions_line",
    "shown_script",
    "summarize",
]

__getattr__ = lazy_names(
    __name__,
    {
        "calls": (
            "Call",
            "Piece",
            "StartLine",
            "chunks",
            "distinct_processes",
            "iter_calls",
            "processes",
        ),
        "columns": (
            "Clock",
            "Stamps",
            "column_loops",
            "decode_submission",
            "first_rows",
            "grouped",
            "looked_up",
            "read_stamp",
            "reduced",
        ),
        "counts": ("Counts", "count", "has_submissions"),
        "driver": ("DriverRecord",),
        "events": ("read_events",),
        "header": ("cluster_line", "cluster_listing", "counted", "session_line"),
        "running": (
            "KIT_RUN_VALUED",
            "Cluster",
            "RayNode",
            "clusters",
            "driver_logs",
            "ray_processes",
            "script_from_argv",
            "script_of",
            "shown_script",
        ),
        "session": ("Session", "flush_own", "instant", "open_session"),
        "session_list": ("Choice", "SessionSummary", "choose_latest", "sessions", "summarize"),
        "session_table": ("sessions_line",),
    },
)
