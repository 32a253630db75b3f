"""The cluster report: nodes' files tallied where they are, joined and merged; two readers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.cluster.merge import cluster_report
    from raytrace_kit._reports.cluster.parallel import report_in_parallel
    from raytrace_kit._reports.cluster.partial import NodeReport
    from raytrace_kit._reports.cluster.times import from_micros, micros

__all__ = [
    "NodeReport",
    "cluster_report",
    "from_micros",
    "micros",
    "report_in_parallel",
]

__getattr__ = lazy_names(
    __name__,
    {
        "merge": ("cluster_report",),
        "parallel": ("report_in_parallel",),
        "partial": ("NodeReport",),
        "times": ("from_micros", "micros"),
    },
)
