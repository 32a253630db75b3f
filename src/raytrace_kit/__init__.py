"""raytrace_kit: make Ray programs debuggable.

Decorate Ray remote functions and actor classes with :func:`debuggable`; every call then
leaves structured events in the Ray session log directory of the node that ran it.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from raytrace_kit._debugger import DebuggerEndpoint, attach_debugger
from raytrace_kit._decorate import debuggable
from raytrace_kit._events import get_logger, read_events
from raytrace_kit._local import LocalActorHandle, is_local_mode, local_mode, set_local_mode
from raytrace_kit._options import DebugOptions, Pin
from raytrace_kit._paths import log_dir
from raytrace_kit._pin import PinnedWorker, ProcessStacks, ThreadStack, stacks
from raytrace_kit._profiling import (
    CpuStats,
    ProfileBlock,
    ProfileSummary,
    cpu_stats,
    flamegraph,
    profile_cpu,
    profile_memory,
    profile_summary,
)
from raytrace_kit._refs import LocalRef, LocalRefGenerator
from raytrace_kit._serialization import (
    SerializationFailure,
    SerializationReport,
    check_serializable,
)
from raytrace_kit._submit import DebuggableActorClass, DebuggableFunction
from raytrace_kit.exceptions import (
    InvalidOptionError,
    InvalidTargetError,
    NodeNotFoundError,
    NotSerializableError,
    RaytraceKitError,
    RaytraceKitWarning,
)

try:
    __version__ = version("raytrace_kit")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "CpuStats",
    "DebugOptions",
    "DebuggableActorClass",
    "DebuggableFunction",
    "DebuggerEndpoint",
    "InvalidOptionError",
    "InvalidTargetError",
    "LocalActorHandle",
    "LocalRef",
    "LocalRefGenerator",
    "NodeNotFoundError",
    "NotSerializableError",
    "Pin",
    "PinnedWorker",
    "ProcessStacks",
    "ProfileBlock",
    "ProfileSummary",
    "RaytraceKitError",
    "RaytraceKitWarning",
    "SerializationFailure",
    "SerializationReport",
    "ThreadStack",
    "__version__",
    "attach_debugger",
    "check_serializable",
    "cpu_stats",
    "debuggable",
    "flamegraph",
    "get_logger",
    "is_local_mode",
    "local_mode",
    "log_dir",
    "profile_cpu",
    "profile_memory",
    "profile_summary",
    "read_events",
    "set_local_mode",
    "stacks",
]
