"""Explanations: each Ray error in plain words, linked to its call; the deaths of workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytrace_kit._reports import lazy_names

if TYPE_CHECKING:
    from raytrace_kit._reports.explain.deaths import find_ray_logs, worker_deaths
    from raytrace_kit._reports.explain.error_text import class_of_message, task_id_of
    from raytrace_kit._reports.explain.errors import explain, explain_task
    from raytrace_kit._reports.explain.explanation import Explanation
    from raytrace_kit._reports.explain.frame_locals import traceback_with_locals

__all__ = [
    "Explanation",
    "class_of_message",
    "explain",
    "explain_task",
    "find_ray_logs",
    "task_id_of",
    "traceback_with_locals",
    "worker_deaths",
]

__getattr__ = lazy_names(
    __name__,
    {
        "deaths": ("find_ray_logs", "worker_deaths"),
        "error_text": ("class_of_message", "task_id_of"),
        "errors": ("explain", "explain_task"),
        "explanation": ("Explanation",),
        "frame_locals": ("traceback_with_locals",),
    },
)
