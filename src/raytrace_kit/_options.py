"""Every setting that travels with a call (DebugOptions, Pin, CallSpec), and all their validation.

These objects are frozen, small and picklable: the driver bakes them into what Ray ships,
so a worker never reads driver state. Validation happens here, at decoration or
submission time, and names the problem and the fix.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from raytrace_kit._output import encode
from raytrace_kit.exceptions import InvalidOptionError

__all__ = [
    "CPROFILE_OPTIONS",
    "MEMRAY_OPTIONS",
    "CallSpec",
    "CheckMode",
    "DebugOptions",
    "KitOptions",
    "Pin",
    "ProfileKind",
    "Program",
    "as_pin",
    "memray_available",
    "qualified_name",
    "validate_option_names",
    "validate_profile_options",
    "validate_stuck_after",
]

_NODE_ID = re.compile(r"^[0-9a-f]{56}$")

CheckMode = Literal["first", "always", "on_error", "off"]
ProfileKind = Literal["memray", "cprofile"]
ProfileScope = Literal["call", "actor"]
Capture = Literal["failures"]


@dataclass(frozen=True, slots=True)
class DebugOptions:
    """How raytrace_kit instruments the calls of one debuggable function or actor class.

    Instances are immutable, hashable and small: they are baked into the instrumented
    function that Ray ships to workers, and serve as cache keys on the driver.

    Attributes:
        log: Emit ``call.start`` / ``call.end`` events for every execution.
        log_args: Also write a short ``repr`` of each argument on ``call.start``, and of
            each local of a failed call's frames on its ``call.end`` (capped; values of
            secret-looking keys redacted; the environment's never). Off by default:
            arguments and locals are the user's data, and may hold secrets the redaction
            cannot recognise. Without it a failed call's locals are types and shapes only.
        local: ``True`` always runs the calls in this process (local mode), ``False``
            never does, ``None`` (the default) follows :func:`raytrace_kit.local_mode`.
        post_mortem: Open a post-mortem debugger at the failing frame when a call raises:
            ``pdb`` in local mode, Ray's debugger (``RAY_DEBUG_POST_MORTEM``) on a cluster.
        check: Serializability checks before submission: ``"first"`` checks the function
            or class once, on its first submission; ``"always"`` also checks every call's
            arguments, and return values in the worker; ``"on_error"`` only explains a
            failure Ray reports; ``"off"`` does nothing.
        profile: ``"memray"`` or ``"cprofile"``: profile every execution in its worker,
            one file per call under ``log_dir() / "profiles"``.
        profile_options: memray's (``native_traces``, ``trace_python_allocators``,
            ``follow_fork``, ``file_format``, ``memory_interval_ms``) or cProfile's
            (``timeunit``, ``subcalls``, ``builtins``) options; given as a dict.
        profile_scope: ``"call"`` (one file per call) or ``"actor"`` (one file from the
            actor's ``__init__`` until it exits, for leak hunting).
        pin: ``True``: all calls of a function run in one dedicated process; a node id:
            every call (or the actor) runs on that node; a :class:`Pin` for both.
        stuck_after: Seconds a call may run before it counts as stuck: it then gets a
            ``call.stuck`` event with its stack and what it waits on, again at twice,
            four times... that age while it runs. ``None`` (the default) takes the
            process's setting (``RAYTRACE_STUCK_AFTER``, else 60 s); ``False`` turns it
            off for these calls.
        sample: The sampling profiler's rate (Hz, 1 to 1000; ``True``: 100) in the processes
            that run these calls, all their threads; ``None``: off (docs/sampling.md).
        capture: ``"failures"``: a failed call keeps its pickled arguments (and an actor's
            state) in a 0600 file, for ``raytrace-kit replay``; ``None`` (default): nothing.
    """

    log: bool = True
    log_args: bool = False
    local: bool | None = None
    post_mortem: bool = False
    check: CheckMode = "first"
    profile: ProfileKind | None = None
    profile_options: tuple[tuple[str, Any], ...] = ()
    profile_scope: ProfileScope = "call"
    pin: Pin | None = None
    stuck_after: float | Literal[False] | None = None
    sample: float | None = None
    capture: Capture | None = None
    # Set internally for calls submitted inside a profile_memory()/profile_cpu() block.
    profile_block: str | None = None
    # Set internally for what instrument() made debuggable: the workers that run its calls
    # instrument what they submit too.
    program: Program | None = None

    def replace(self, **changes: Any) -> DebugOptions:
        """Return a copy with ``changes`` applied, after validating them.

        Raises:
            InvalidOptionError: An unknown keyword, a value of the wrong type, or profiling
                options that do not fit the profiler (or memray missing for ``"memray"``).
        """
        if not changes:
            return self
        validate_option_names(changes)
        if "pin" in changes:
            changes["pin"] = as_pin(changes["pin"])
        if "profile_options" in changes:
            changes["profile_options"] = tuple(sorted(changes["profile_options"].items()))
        if "sample" in changes:
            changes["sample"] = _sample_rate(changes["sample"])
        updated = dataclasses.replace(self, **changes)
        if "profile" in changes or "profile_options" in changes:
            problem = validate_profile_options(updated.profile, dict(updated.profile_options))
            if problem:
                raise InvalidOptionError(problem, "profile")
        if "stuck_after" in changes:
            validate_stuck_after(changes["stuck_after"])
        if changes.get("profile_scope") == "actor" and updated.profile is None:
            msg = (
                "profile_scope='actor' needs a profiler: add profile='memray' (leak hunting) "
                "or profile='cprofile'."
            )
            raise InvalidOptionError(msg, "profile_scope")
        return updated


@dataclass(frozen=True, slots=True)
class Program:
    """What :func:`raytrace_kit.instrument` covers: travels with each call it instruments.

    Attributes:
        install: Installs the instrumentation in a process (the worker that runs a call),
            given the options of what is instrumented:
            a module-level function, shipped by reference.
        include: Module name patterns (``fnmatch``) instrumented even outside the user's
            code (a third-party package, say).
        exclude: Module name patterns never instrumented (they win over ``include``).
    """

    install: Callable[[DebugOptions], None]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pin:
    """Where the calls of a debuggable run.

    ``pin=True`` is ``Pin()``: one dedicated process for all calls of a function.
    ``pin="<node id>"`` is ``Pin(node_id=..., process=False)``: every call (or the actor)
    scheduled on that node. ``Pin(node_id=...)`` gives both.

    Attributes:
        node_id: A node id in hex (``ray.nodes()[i]["NodeID"]``), or ``None``.
        process: Run all calls of a function in one dedicated process.
    """

    node_id: str | None = None
    process: bool = True

    def __post_init__(self) -> None:
        if self.node_id is None and not self.process:
            msg = (
                "Pin(process=False) without a node_id pins nothing: give node_id=... to choose "
                "the node, or leave process=True for one dedicated process."
            )
            raise InvalidOptionError(msg, "pin")
        if self.node_id is not None and not _NODE_ID.match(self.node_id):
            msg = (
                f"pin node id {self.node_id!r} is not a Ray node id (56 hex digits); "
                "take one from ray.nodes()[i]['NodeID'] or "
                "ray.get_runtime_context().get_node_id()."
            )
            raise InvalidOptionError(msg, "pin")


def as_pin(value: object) -> Pin | None:
    """Normalize the ``pin`` option: ``None``/``False``, ``True``, a node id, or a Pin."""
    if value is None or value is False:
        return None
    if value is True:
        return Pin()
    if isinstance(value, str):
        return Pin(node_id=value, process=False)
    if isinstance(value, Pin):
        return value
    msg = f"pin={value!r}: expected True, a node id string, or raytrace_kit.Pin(...)"
    raise InvalidOptionError(msg, "pin")


class KitOptions(TypedDict, total=False):
    """The keyword options of ``debuggable()`` and ``.with_debug()``, for type checkers."""

    log: bool
    log_args: bool
    local: bool | None
    post_mortem: bool
    check: CheckMode
    profile: ProfileKind | None
    profile_options: dict[str, Any]
    profile_scope: ProfileScope
    pin: bool | str | Pin | None
    stuck_after: float | Literal[False] | None
    sample: bool | float | None
    capture: Capture | None


# One entry per option: the accepted types and how to describe them in an error.
_OPTION_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "log": ((bool,), "a bool"),
    "log_args": ((bool,), "a bool"),
    "local": ((bool, type(None)), "True, False or None"),
    "post_mortem": ((bool,), "a bool"),
    "check": ((str,), "one of 'first', 'always', 'on_error', 'off'"),
    "profile": ((str, type(None)), "'memray', 'cprofile' or None"),
    "profile_options": ((dict,), "a dict of the profiler's options"),
    "profile_scope": ((str,), "'call' or 'actor'"),
    "pin": ((bool, str, Pin, type(None)), "True, a node id string, or raytrace_kit.Pin(...)"),
    "stuck_after": ((int, float, bool, type(None)), "a number of seconds, False or None"),
    "sample": ((bool, int, float, type(None)), "True, a rate in Hz (1 to 1000), or None"),
    "capture": ((str, type(None)), "'failures' or None"),
}
_CHOICES: dict[str, tuple[object, ...]] = {
    "check": ("first", "always", "on_error", "off"),
    "profile": ("memray", "cprofile", None),
    "profile_scope": ("call", "actor"),
    "capture": ("failures", None),
}


def validate_option_names(options: dict[str, Any]) -> None:
    """Check raytrace_kit keyword options, naming the problem and the fix.

    Raises:
        InvalidOptionError: An unknown keyword, or a value of the wrong type.
    """
    for name, value in options.items():
        spec = _OPTION_TYPES.get(name)
        if spec is None:
            valid = ", ".join(sorted(_OPTION_TYPES))
            msg = (
                f"unknown raytrace_kit option {name!r}; valid options are: {valid}. "
                "Ray options such as num_cpus belong in @ray.remote(...) or .options(...)."
            )
            raise InvalidOptionError(msg, name)
        types, description = spec
        choices = _CHOICES.get(name)
        if not isinstance(value, types):
            msg = (
                f"raytrace_kit option {name}={value!r} has type "
                f"{type(value).__name__}; expected {description}."
            )
            raise InvalidOptionError(msg, name)
        if choices is not None and value not in choices:
            msg = f"raytrace_kit option {name}={value!r} is not valid; expected {description}."
            raise InvalidOptionError(msg, name)


def validate_stuck_after(value: object) -> None:
    """Check ``stuck_after``: a positive number of seconds, ``False`` (off) or ``None``.

    Raises:
        InvalidOptionError: Anything else, naming what is expected.
    """
    if value is None or value is False:
        return
    if not _is_positive_number(value):
        msg = (
            f"raytrace_kit option stuck_after={value!r} is not valid: expected a positive "
            "number of seconds (a call running longer counts as stuck), False to turn the "
            "watch off, or None for the process's setting (RAYTRACE_STUCK_AFTER, else 60 s)."
        )
        raise InvalidOptionError(msg, "stuck_after")


def _sample_rate(value: object) -> float | None:
    """``sample`` in Hz (``True``: 100; ``False``/``None``: off), or InvalidOptionError."""
    rate = 100.0 if value is True else None if value is False else value
    if rate is not None and not (_is_positive_number(rate) and 1 <= rate <= 1000):  # type: ignore[operator]
        msg = (
            f"raytrace_kit option sample={value!r} is not valid: expected True (100 Hz), "
            "a rate in Hz from 1 to 1000 (sample=200), or None to turn it off."
        )
        raise InvalidOptionError(msg, "sample")
    return None if rate is None else float(rate)  # type: ignore[arg-type]


MEMRAY_OPTIONS = frozenset(
    {"native_traces", "trace_python_allocators", "follow_fork", "file_format", "memory_interval_ms"}
)
CPROFILE_OPTIONS = frozenset({"timeunit", "subcalls", "builtins"})


def memray_available() -> bool:
    """Whether memray can be imported here (it is not available on Windows)."""
    return importlib.util.find_spec("memray") is not None


def validate_profile_options(kind: str | None, options: dict[str, Any]) -> str | None:
    """Return what is wrong with ``profile``/``profile_options``, or ``None``."""
    if kind == "memray" and not memray_available():
        return (
            "profile='memray' needs memray, which is not installed here (it does not support "
            "Windows): `pip install memray`, or use profile='cprofile'."
        )
    allowed = MEMRAY_OPTIONS if kind == "memray" else CPROFILE_OPTIONS
    unknown = sorted(set(options) - allowed)
    if options and kind is None:
        return "profile_options needs profile='memray' or profile='cprofile'."
    if unknown:
        return (
            f"unknown {kind} option(s) {', '.join(unknown)}; valid ones are: "
            f"{', '.join(sorted(allowed))}."
        )
    for name, value in options.items():
        check, expected = _OPTION_VALUES[name]
        if not check(value):
            return f"{kind} option {name}={value!r} is not valid: expected {expected}."
    return None


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_file_format(value: object) -> bool:
    # By name, or memray's own FileFormat member (an enum whose name is one of these).
    return getattr(value, "name", value) in _FILE_FORMATS


def _is_positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


_FILE_FORMATS = ("ALL_ALLOCATIONS", "AGGREGATED_ALLOCATIONS")
_BOOL = (_is_bool, "True or False")
_OPTION_VALUES: dict[str, tuple[Any, str]] = {
    "native_traces": _BOOL,
    "trace_python_allocators": _BOOL,
    "follow_fork": _BOOL,
    "file_format": (_is_file_format, "'ALL_ALLOCATIONS' or 'AGGREGATED_ALLOCATIONS'"),
    "memory_interval_ms": (_is_positive_int, "a positive whole number of milliseconds"),
    "timeunit": (_is_positive_number, "a positive number (seconds per timer unit)"),
    "subcalls": _BOOL,
    "builtins": _BOOL,
}


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a function or class, as events report it."""
    return f"{obj.__module__}.{obj.__qualname__}"


@dataclass(frozen=True, slots=True)
class CallSpec:
    """What the worker needs to know about the callable it instruments.

    Attributes:
        function: Qualified name (``module.function`` or ``module.Class.method``).
        kind: ``task``, ``actor_init`` or ``actor_method``.
        options: The raytrace_kit options in force for these calls.
        operator: For a Ray Data UDF, the operator that runs it (``MapBatches(clean)``).
    """

    function: str
    kind: str
    options: DebugOptions
    operator: str | None = None
    # Derived once on the driver and shipped with the spec, so workers never re-render.
    fields: dict[str, str] = field(init=False, compare=False, repr=False)
    fragment: str = field(init=False, compare=False, repr=False)
    # The watch's setting for these calls: stuck_after, or False when nothing is logged.
    watch: float | Literal[False] | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        fields = {"function": self.function, "kind": self.kind}
        if self.operator is not None:
            fields["operator"] = self.operator
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "fragment", encode.members(fields))
        watch = self.options.stuck_after if self.options.log else False
        object.__setattr__(self, "watch", watch)
