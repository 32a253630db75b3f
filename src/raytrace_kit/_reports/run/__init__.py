"""The run report: one pass over the calls, sums that merge, findings, text, HTML, pictures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.run.blocked import BlockedLoops, each
    from raytrace_kit._reports.run.by_value import COPIED_MIN_BYTES, ByValue, size_text
    from raytrace_kit._reports.run.data_findings import (
        BOUND_MIN_P50_S,
        GROWTH_MIN_BYTES,
        data_explained,
        data_section,
    )
    from raytrace_kit._reports.run.data_ops import DataOps
    from raytrace_kit._reports.run.finding import Finding
    from raytrace_kit._reports.run.flights import loops_of
    from raytrace_kit._reports.run.interrupted import FORCE_CANCELLED
    from raytrace_kit._reports.run.lanes import MARKS, POINTS
    from raytrace_kit._reports.run.names import CallNames
    from raytrace_kit._reports.run.packing import pack_floats, pack_ints, unpack_floats, unpack_ints
    from raytrace_kit._reports.run.sections import Report, report
    from raytrace_kit._reports.run.store_refs import (
        FULL,
        Group,
        HeldView,
        group,
        held_findings,
        sites_of,
    )
    from raytrace_kit._reports.run.sums import FailureGroup, Function, LaneTotal, RunSums

__all__ = [
    "BOUND_MIN_P50_S",
    "COPIED_MIN_BYTES",
    "FORCE_CANCELLED",
    "FULL",
    "GROWTH_MIN_BYTES",
    "MARKS",
    "POINTS",
    "BlockedLoops",
    "ByValue",
    "CallNames",
    "DataOps",
    "FailureGroup",
    "Finding",
    "Function",
    "Group",
    "HeldView",
    "LaneTotal",
    "Report",
    "RunSums",
    "data_explained",
    "data_section",
    "each",
    "group",
    "held_findings",
    "loops_of",
    "pack_floats",
    "pack_ints",
    "report",
    "sites_of",
    "size_text",
    "unpack_floats",
    "unpack_ints",
]

__getattr__ = lazy_names(
    __name__,
    {
        "blocked": ("BlockedLoops", "each"),
        "by_value": ("ByValue", "COPIED_MIN_BYTES", "size_text"),
        "data_findings": ("BOUND_MIN_P50_S", "GROWTH_MIN_BYTES", "data_explained", "data_section"),
        "data_ops": ("DataOps",),
        "finding": ("Finding",),
        "flights": ("loops_of",),
        "interrupted": ("FORCE_CANCELLED",),
        "lanes": ("MARKS", "POINTS"),
        "names": ("CallNames",),
        "packing": ("pack_floats", "pack_ints", "unpack_floats", "unpack_ints"),
        "sections": ("Report", "report"),
        "store_refs": ("FULL", "Group", "HeldView", "group", "held_findings", "sites_of"),
        "sums": ("FailureGroup", "Function", "LaneTotal", "RunSums"),
    },
)
