"""raytrace_kit: make Ray programs debuggable.

Decorate Ray remote functions and actor classes with :func:`debuggable`; every call then
leaves structured events in the Ray session log directory of the node that ran it.

Importing the package is cheap: each name loads its module (and Ray, for most) on first
use, so ``raytrace-kit report`` and the pytest plugin start without importing Ray.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raytrace_kit._driver.actor_class import DebuggableActorClass
    from raytrace_kit._driver.blocks import ProfileBlock, profile_cpu, profile_memory
    from raytrace_kit._driver.cluster_report import report
    from raytrace_kit._driver.collect import collect
    from raytrace_kit._driver.coverage import coverage
    from raytrace_kit._driver.decorate import debuggable
    from raytrace_kit._driver.function import DebuggableFunction
    from raytrace_kit._driver.live import top
    from raytrace_kit._driver.program import instrument
    from raytrace_kit._driver.replay import replay
    from raytrace_kit._driver.stacks import stacks
    from raytrace_kit._driver.stuck import stuck
    from raytrace_kit._local.handles import LocalActorHandle
    from raytrace_kit._local.refs import LocalRef, LocalRefGenerator
    from raytrace_kit._local.switch import is_local_mode, local_mode, set_local_mode
    from raytrace_kit._options import DebugOptions, Pin
    from raytrace_kit._output.logger import echo, get_logger
    from raytrace_kit._output.paths import log_dir
    from raytrace_kit._reports.explain import Explanation, explain
    from raytrace_kit._reports.live import TopView
    from raytrace_kit._reports.profiles import (
        CpuStats,
        ProfileSummary,
        cpu_stats,
        flamegraph,
        profile_summary,
    )
    from raytrace_kit._reports.reading import (
        Call,
        Session,
        SessionSummary,
        open_session,
        read_events,
        sessions,
    )
    from raytrace_kit._reports.run import Finding, Report
    from raytrace_kit._reports.stuck import StuckReport
    from raytrace_kit._reports.timeline import timeline
    from raytrace_kit._serialization.report import SerializationFailure, SerializationReport
    from raytrace_kit._serialization.walk import check_serializable
    from raytrace_kit._worker.debugger import DebuggerEndpoint, attach_debugger
    from raytrace_kit._worker.runner import PinnedWorker
    from raytrace_kit._worker.stacks import ProcessStacks, ThreadStack
    from raytrace_kit.exceptions import (
        ClusterConnectionError,
        CoverageError,
        EventsNotFoundError,
        ExportError,
        InvalidOptionError,
        InvalidTargetError,
        InvalidValueError,
        LocalModeError,
        MissingExtraError,
        NodeNotFoundError,
        NotSerializableError,
        ProfileError,
        ProfileNotFoundError,
        RaytraceKitError,
        RaytraceKitWarning,
        ReplayError,
        UnsafeReplayFileError,
        UsageError,
    )

_LAZY = {
    "load_ipython_extension": "raytrace_kit._notebook.magics",
    "DebuggableActorClass": "raytrace_kit._driver.actor_class",
    "ProfileBlock": "raytrace_kit._driver.blocks",
    "profile_cpu": "raytrace_kit._driver.blocks",
    "profile_memory": "raytrace_kit._driver.blocks",
    "collect": "raytrace_kit._driver.collect",
    "coverage": "raytrace_kit._driver.coverage",
    "debuggable": "raytrace_kit._driver.decorate",
    "instrument": "raytrace_kit._driver.program",
    "replay": "raytrace_kit._driver.replay",
    "DebuggableFunction": "raytrace_kit._driver.function",
    "top": "raytrace_kit._driver.live",
    "report": "raytrace_kit._driver.cluster_report",
    "stacks": "raytrace_kit._driver.stacks",
    "stuck": "raytrace_kit._driver.stuck",
    "LocalActorHandle": "raytrace_kit._local.handles",
    "LocalRef": "raytrace_kit._local.refs",
    "LocalRefGenerator": "raytrace_kit._local.refs",
    "is_local_mode": "raytrace_kit._local.switch",
    "local_mode": "raytrace_kit._local.switch",
    "set_local_mode": "raytrace_kit._local.switch",
    "DebugOptions": "raytrace_kit._options",
    "Pin": "raytrace_kit._options",
    "get_logger": "raytrace_kit._output.logger",
    "echo": "raytrace_kit._output.logger",
    "log_dir": "raytrace_kit._output.paths",
    "read_events": "raytrace_kit._reports.reading",
    "Explanation": "raytrace_kit._reports.explain",
    "explain": "raytrace_kit._reports.explain",
    "CpuStats": "raytrace_kit._reports.profiles",
    "ProfileSummary": "raytrace_kit._reports.profiles",
    "cpu_stats": "raytrace_kit._reports.profiles",
    "flamegraph": "raytrace_kit._reports.profiles",
    "profile_summary": "raytrace_kit._reports.profiles",
    "Finding": "raytrace_kit._reports.run",
    "Report": "raytrace_kit._reports.run",
    "StuckReport": "raytrace_kit._reports.stuck",
    "Call": "raytrace_kit._reports.reading",
    "Session": "raytrace_kit._reports.reading",
    "open_session": "raytrace_kit._reports.reading",
    "SessionSummary": "raytrace_kit._reports.reading",
    "sessions": "raytrace_kit._reports.reading",
    "timeline": "raytrace_kit._reports.timeline",
    "TopView": "raytrace_kit._reports.live",
    "SerializationFailure": "raytrace_kit._serialization.report",
    "SerializationReport": "raytrace_kit._serialization.report",
    "check_serializable": "raytrace_kit._serialization.walk",
    "DebuggerEndpoint": "raytrace_kit._worker.debugger",
    "attach_debugger": "raytrace_kit._worker.debugger",
    "PinnedWorker": "raytrace_kit._worker.runner",
    "ProcessStacks": "raytrace_kit._worker.stacks",
    "ThreadStack": "raytrace_kit._worker.stacks",
    "ClusterConnectionError": "raytrace_kit.exceptions",
    "CoverageError": "raytrace_kit.exceptions",
    "EventsNotFoundError": "raytrace_kit.exceptions",
    "ExportError": "raytrace_kit.exceptions",
    "InvalidOptionError": "raytrace_kit.exceptions",
    "InvalidTargetError": "raytrace_kit.exceptions",
    "InvalidValueError": "raytrace_kit.exceptions",
    "LocalModeError": "raytrace_kit.exceptions",
    "MissingExtraError": "raytrace_kit.exceptions",
    "NodeNotFoundError": "raytrace_kit.exceptions",
    "NotSerializableError": "raytrace_kit.exceptions",
    "ProfileError": "raytrace_kit.exceptions",
    "ProfileNotFoundError": "raytrace_kit.exceptions",
    "RaytraceKitError": "raytrace_kit.exceptions",
    "RaytraceKitWarning": "raytrace_kit.exceptions",
    "ReplayError": "raytrace_kit.exceptions",
    "UnsafeReplayFileError": "raytrace_kit.exceptions",
    "UsageError": "raytrace_kit.exceptions",
}

# Read on first use (see __getattr__): asking importlib.metadata costs each Ray worker,
# which imports this package at its first call and never asks, about 3 ms.
__version__: str

__all__ = [
    "Call",
    "ClusterConnectionError",
    "CoverageError",
    "CpuStats",
    "DebugOptions",
    "DebuggableActorClass",
    "DebuggableFunction",
    "DebuggerEndpoint",
    "EventsNotFoundError",
    "Explanation",
    "ExportError",
    "Finding",
    "InvalidOptionError",
    "InvalidTargetError",
    "InvalidValueError",
    "LocalActorHandle",
    "LocalModeError",
    "LocalRef",
    "LocalRefGenerator",
    "MissingExtraError",
    "NodeNotFoundError",
    "NotSerializableError",
    "Pin",
    "PinnedWorker",
    "ProcessStacks",
    "ProfileBlock",
    "ProfileError",
    "ProfileNotFoundError",
    "ProfileSummary",
    "RaytraceKitError",
    "RaytraceKitWarning",
    "ReplayError",
    "Report",
    "SerializationFailure",
    "SerializationReport",
    "Session",
    "SessionSummary",
    "StuckReport",
    "ThreadStack",
    "TopView",
    "UnsafeReplayFileError",
    "UsageError",
    "__version__",
    "attach_debugger",
    "check_serializable",
    "collect",
    "coverage",
    "cpu_stats",
    "debuggable",
    "echo",
    "explain",
    "flamegraph",
    "get_logger",
    "instrument",
    "is_local_mode",
    "local_mode",
    "log_dir",
    "open_session",
    "profile_cpu",
    "profile_memory",
    "profile_summary",
    "read_events",
    "replay",
    "report",
    "sessions",
    "set_local_mode",
    "stacks",
    "stuck",
    "timeline",
    "top",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562); the version read at first ask."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            found = version("raytrace_kit")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0+unknown"
        globals()[name] = found
        return found
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'raytrace_kit' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
