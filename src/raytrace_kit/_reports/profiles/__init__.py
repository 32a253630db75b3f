"""Profiles read back: memray and cProfile captures, the sampler's files and their formats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.profiles.cprofile_table import CpuStats, cpu_stats
    from raytrace_kit._reports.profiles.formats import collapsed, pprof, speedscope
    from raytrace_kit._reports.profiles.memray_html import flamegraph
    from raytrace_kit._reports.profiles.sample_calls import recent, straggler_lines
    from raytrace_kit._reports.profiles.samples import (
        Frame,
        SampleRow,
        hottest_line,
        hottest_lines,
        read_samples,
        select,
    )
    from raytrace_kit._reports.profiles.summary import ProfileSummary, profile_summary

__all__ = [
    "CpuStats",
    "Frame",
    "ProfileSummary",
    "SampleRow",
    "collapsed",
    "cpu_stats",
    "flamegraph",
    "hottest_line",
    "hottest_lines",
    "pprof",
    "profile_summary",
    "read_samples",
    "recent",
    "select",
    "speedscope",
    "straggler_lines",
]

__getattr__ = lazy_names(
    __name__,
    {
        "cprofile_table": ("CpuStats", "cpu_stats"),
        "formats": ("collapsed", "pprof", "speedscope"),
        "memray_html": ("flamegraph",),
        "sample_calls": ("recent", "straggler_lines"),
        "samples": (
            "Frame",
            "SampleRow",
            "hottest_line",
            "hottest_lines",
            "read_samples",
            "select",
        ),
        "summary": ("ProfileSummary", "profile_summary"),
    },
)
