"""What only some calls need, imported by the first call that needs it, never failing one.

A Ray worker pays for every module its first instrumented call imports, and a cluster
starts many workers: the boundary imports at its first call only what every call needs,
and reaches the rest through here. Each function imports its module in its body (after
the first time, a look-up in ``sys.modules``). A module that cannot be imported (a broken
install, a missing dependency, any exception it raises) costs one warning and one event
for the process, through :func:`~raytrace_kit._output.writer.report_failure`; the feature
is then off in this process, and the user's call goes on with its own result or exception.

What these functions do themselves (a return value's check, its
:class:`~raytrace_kit.exceptions.NotSerializableError`) behaves as it would imported at
the top: only a failure to import is caught here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raytrace_kit._output import writer
from raytrace_kit._worker import state as worker_state

if TYPE_CHECKING:
    from raytrace_kit._options import CallSpec
    from raytrace_kit._output.context import ActiveCall
    from raytrace_kit._worker.profilers import CallProfile

__all__ = ["check_return", "failed", "loop_started", "start_profile", "start_sampler"]

# What each function's module gives the user, in the warning when it cannot be imported.
_FEATURES = {
    "profilers": "the call's profile",
    "sampler": "the sampling profiler",
    "loops": "the watch on async calls' event loops",
    "capture": "a failed call's locals and replay file",
    "serialization": "the check of return values (check='always')",
}


def _unavailable(module: str, exc: Exception) -> None:
    """``module`` could not be imported: said once, and not tried again in this process."""
    worker_state.state.unimportable.add(module)
    writer.report_failure(
        f"import-{module}", f"cannot import {_FEATURES[module]} ({module}), which stays off", exc
    )


def start_profile(spec: CallSpec, call: ActiveCall) -> CallProfile | None:
    """:func:`.profilers.start_call`; ``None`` (the call unprofiled) without its module."""
    if "profilers" in worker_state.state.unimportable:
        return None
    try:
        from raytrace_kit._worker import profilers  # noqa: PLC0415 -- on demand (module doc)
    except Exception as exc:
        _unavailable("profilers", exc)
        return None
    return profilers.start_call(spec, call)


def start_sampler(hz: float) -> None:
    """:func:`.sampler.start`: this process's sampling profiler (once). Never raises."""
    if "sampler" in worker_state.state.unimportable:
        return
    try:
        from raytrace_kit._worker import sampler  # noqa: PLC0415 -- on demand (module doc)
    except Exception as exc:
        _unavailable("sampler", exc)
        return
    sampler.start(hz)


def loop_started(call: ActiveCall) -> None:
    """:func:`.loops.started`: an async call's event loop watched. Never raises."""
    if "loops" in worker_state.state.unimportable:
        return
    try:
        from raytrace_kit._worker import loops  # noqa: PLC0415 -- on demand (module doc)
    except Exception as exc:
        _unavailable("loops", exc)
        return
    loops.started(call)


def failed(
    call: ActiveCall,
    spec: CallSpec,
    inputs: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], int | None] | None,
    error: BaseException,
) -> str:
    """:func:`.capture.failed`: a failed call's locals and replay file; ``""`` without them."""
    if "capture" in worker_state.state.unimportable:
        return ""
    try:
        from raytrace_kit._worker import capture  # noqa: PLC0415 -- on demand (module doc)
    except Exception as exc:
        _unavailable("capture", exc)
        return ""
    return capture.failed(call, spec, inputs, error)


def check_return(spec: CallSpec, value: Any) -> None:
    """``check="always"``: fail the call, in the worker, if Ray cannot send ``value`` back.

    Raises:
        NotSerializableError: With the report; ``ray.get`` raises it on the driver.
    """
    if "serialization" in worker_state.state.unimportable:
        return
    try:
        from raytrace_kit._serialization.report import reject  # noqa: PLC0415 -- on demand
        from raytrace_kit._serialization.walk import check_serializable  # noqa: PLC0415
    except Exception as exc:
        _unavailable("serialization", exc)
        return
    report = check_serializable(value, name=f"the return value of {spec.function}", scope="return")
    if not report.ok:
        # Redacted: the message travels to the driver and into Ray's logs.
        reject(report, "returning from the call", spec.function, redact=True)
