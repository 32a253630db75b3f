"""raytrace_kit: make Ray programs debuggable.

Decorate Ray remote functions and actor classes with :func:`debuggable`; every call then
leaves structured events in the Ray session log directory of the node that ran it.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from raytrace_kit._driver.actor_class import DebuggableActorClass
from raytrace_kit._driver.blocks import ProfileBlock, profile_cpu, profile_memory
from raytrace_kit._driver.collect import collect
from raytrace_kit._driver.decorate import debuggable
from raytrace_kit._driver.function import DebuggableFunction
from raytrace_kit._driver.stacks import stacks
from raytrace_kit._local.actors import LocalActorHandle
from raytrace_kit._local.refs import LocalRef, LocalRefGenerator
from raytrace_kit._local.switch import is_local_mode, local_mode, set_local_mode
from raytrace_kit._options import DebugOptions, Pin
from raytrace_kit._output.logger import get_logger
from raytrace_kit._output.paths import log_dir
from raytrace_kit._reports.events import read_events
from raytrace_kit._reports.explain import Explanation, explain
from raytrace_kit._reports.profiles import (
    CpuStats,
    ProfileSummary,
    cpu_stats,
    flamegraph,
    profile_summary,
)
from raytrace_kit._reports.report import Finding, Report, report
from raytrace_kit._reports.session import Call, Session, open_session
from raytrace_kit._reports.timeline import timeline
from raytrace_kit._serialization.report import SerializationFailure, SerializationReport
from raytrace_kit._serialization.walk import check_serializable
from raytrace_kit._worker.debugger import DebuggerEndpoint, attach_debugger
from raytrace_kit._worker.runner import PinnedWorker
from raytrace_kit._worker.stacks import ProcessStacks, ThreadStack
from raytrace_kit.exceptions import (
    EventsNotFoundError,
    InvalidOptionError,
    InvalidTargetError,
    InvalidValueError,
    LocalModeError,
    NodeNotFoundError,
    NotSerializableError,
    ProfileError,
    ProfileNotFoundError,
    RaytraceKitError,
    RaytraceKitWarning,
    UsageError,
)

try:
    __version__ = version("raytrace_kit")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Call",
    "CpuStats",
    "DebugOptions",
    "DebuggableActorClass",
    "DebuggableFunction",
    "DebuggerEndpoint",
    "EventsNotFoundError",
    "Explanation",
    "Finding",
    "InvalidOptionError",
    "InvalidTargetError",
    "InvalidValueError",
    "LocalActorHandle",
    "LocalModeError",
    "LocalRef",
    "LocalRefGenerator",
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
    "Report",
    "SerializationFailure",
    "SerializationReport",
    "Session",
    "ThreadStack",
    "UsageError",
    "__version__",
    "attach_debugger",
    "check_serializable",
    "collect",
    "cpu_stats",
    "debuggable",
    "explain",
    "flamegraph",
    "get_logger",
    "is_local_mode",
    "local_mode",
    "log_dir",
    "open_session",
    "profile_cpu",
    "profile_memory",
    "profile_summary",
    "read_events",
    "report",
    "set_local_mode",
    "stacks",
    "timeline",
]
