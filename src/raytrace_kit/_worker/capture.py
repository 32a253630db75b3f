"""``capture="failures"``: a failed call's inputs kept in its replay file, for replay.

Only when the call raised: a call that succeeds pays for nothing but holding its
arguments' tuple, which its caller holds anyway. The inputs are pickled with Ray's
cloudpickle (as Ray pickles them) in a buffer that stops at the cap, then written with
mode 0600 (:mod:`raytrace_kit._output.replay_file`). For an actor method the instance's
state is kept too, where it pickles, with its class (the user's, not Ray's subclass).
Nothing here may break the call: what cannot be kept is one warning, one
``instrumentation.error`` line, and a reason in the call's record; the call's exception
passes through as raised.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import ray.cloudpickle

from raytrace_kit._options import CallSpec, qualified_name
from raytrace_kit._output import encode, replay_file, writer
from raytrace_kit._output.context import ActiveCall

__all__ = ["failed", "keep", "state_of", "user_class"]

_NOT_FAILURES = (SystemExit, GeneratorExit)  # they end a call on purpose: nothing to replay
_WHAT = "cannot keep the failed call's inputs for replay"


class _TooLargeError(Exception):
    """The pickle went past the cap."""


class _Capped:
    """A file for the pickler that keeps at most ``limit`` bytes, then stops it."""

    __slots__ = ("chunks", "limit", "size")

    def __init__(self, limit: int) -> None:
        self.chunks: list[bytes] = []
        self.limit = limit
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise _TooLargeError
        self.chunks.append(bytes(data))
        return len(data)


def failed(
    call: ActiveCall,
    spec: CallSpec,
    inputs: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], int | None] | None,
    error: BaseException,
) -> str:
    """What a failed call's ``call.end`` adds: its locals, and its replay file (or why none)."""
    # Imported at the first failure: the boundary loads this module in every worker.
    from raytrace_kit._output.locals import failed_locals  # noqa: PLC0415

    return encode.locals_members(failed_locals(error, spec), **keep(call, spec, inputs, error))


def keep(
    call: ActiveCall,
    spec: CallSpec,
    inputs: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], int | None] | None,
    error: BaseException,
) -> dict[str, str | None]:
    """Keep a failed call's inputs; return its ``call.end``'s ``replay_*`` (where, or why not).

    ``inputs`` is the function, its positional and keyword arguments (the instance
    first, for a method), and the instance's id for a method of an actor; ``None``
    without ``capture``. Never raises.
    """
    if inputs is None or isinstance(error, _NOT_FAILURES) or call.call_id is None:
        return {}
    fn, args, kwargs, owner = inputs
    try:
        path = replay_file.path_for(call.call_id)
        header, payload, state_missing = _pickled(spec, fn, args, kwargs, owner)
        header.update(call_id=call.call_id, task_id=call.task_id, error_type=type(error).__name__)
        replay_file.write(path, header, payload)
    except _NotKeptError as why:
        writer.report_failure("capture", _WHAT, why)
        return {"missing": str(why)}
    except Exception as exc:  # disk full, an unwritable directory, a bug of ours
        writer.report_failure("capture", _WHAT, exc)
        detail = f"{type(exc).__name__}: {encode.safe_str(exc)}"[:300]
        return {"missing": f"the file could not be written ({detail})"}
    return {"path": str(path), "state_missing": state_missing}


class _NotKeptError(Exception):
    """Why a call's inputs were not kept: the record's ``replay_missing``."""


def _pickled(
    spec: CallSpec,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None,
) -> tuple[dict[str, Any], bytes, str | None]:
    """The header, the payload and why the actor's state is missing (``None``: kept)."""
    limit = replay_file.max_bytes()
    instance = args[0] if owner is not None and args else None
    call_args = args[1:] if instance is not None else args
    inputs: dict[str, Any] = {"function": fn, "args": call_args, "kwargs": kwargs}
    state_missing = None
    if instance is not None:
        try:
            inputs["actor_class"] = user_class(type(instance), spec.function)
            inputs["actor_state"] = state_of(instance)
        except Exception as exc:
            state_missing = f"its state cannot be read ({type(exc).__name__})"
    try:
        payload = _dumps(inputs, limit)
    except _TooLargeError:
        payload = None
        if instance is None or state_missing is not None:
            raise _NotKeptError(_too_large(limit)) from None
        state_missing = f"the actor's state is over the {_mib(limit)} cap with the arguments"
    except Exception as exc:
        payload = None
        if state_missing is None and instance is not None:
            state_missing = f"the actor's state cannot be pickled ({_why(exc)})"
        else:
            raise _NotKeptError(_culprit(fn, call_args, kwargs, exc)) from None
    if payload is None:  # without the actor's state: the arguments alone
        inputs.pop("actor_state", None)
        try:
            payload = _dumps(inputs, limit)
        except _TooLargeError:
            raise _NotKeptError(_too_large(limit)) from None
        except Exception as exc:
            raise _NotKeptError(_culprit(fn, call_args, kwargs, exc)) from None
    header = {
        "format": replay_file.FORMAT,
        "function": spec.function,
        "kind": spec.kind,
        "module": getattr(fn, "__module__", None),
        "qualname": getattr(fn, "__qualname__", None),
        "method": instance is not None,
        "program": spec.options.program is not None,  # instrument(): plain remotes too
        "actor_state": "kept" if instance is not None and state_missing is None else None,
        "actor_state_missing": state_missing,
        "cwd": os.getcwd(),
        "sys_path": list(sys.path),
        "python": sys.executable,
    }
    return header, payload, state_missing


def _dumps(inputs: dict[str, Any], limit: int) -> bytes:
    capped = _Capped(limit)
    ray.cloudpickle.dump(inputs, capped)
    return b"".join(capped.chunks)


def user_class(cls: type, function: str) -> type:
    """The user's class an actor's instance is of: Ray's subclass of it has its name too.

    ``function`` is the method's qualified name (``module.Class.method``): the class is the
    last one of the instance's MRO with that ``module.Class`` (Ray's subclass, which the
    kit instruments, copies the user's module and qualified name and comes first).
    """
    name = function.rpartition(".")[0]
    named = [klass for klass in cls.__mro__ if qualified_name(klass) == name]
    return named[-1] if named else cls


def state_of(instance: object) -> Any:
    """What pickle keeps of an instance: ``__getstate__()``, else its ``__dict__``."""
    getstate = getattr(instance, "__getstate__", None)
    if getstate is not None:  # object has one from Python 3.11; a class may define its own
        return getstate()
    return dict(vars(instance))


def _culprit(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception
) -> str:
    """Which input cannot be pickled: its name and type, never its value."""
    names: list[str] = []
    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        parameters = []
    if parameters and parameters[0] in {"self", "cls"}:
        parameters = parameters[1:]
    labelled = [
        (parameters[at] if at < len(parameters) else f"#{at}", value)
        for at, value in enumerate(args)
    ]
    for label, value in [*labelled, *kwargs.items()]:
        try:
            ray.cloudpickle.dumps(value)
        except Exception:
            names.append(f"{label!r} (a {type(value).__qualname__})")
    if not names:
        return f"the call's inputs cannot be pickled ({_why(exc)})"
    return f"argument {', '.join(names)} cannot be pickled ({_why(exc)})"


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {encode.safe_str(exc)}"[:200]


def _mib(limit: int) -> str:
    return f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit} bytes"


def _too_large(limit: int) -> str:
    return (
        f"its inputs are over the {_mib(limit)} cap pickled "
        f"({replay_file.ENV_MAX_BYTES} sets it, in bytes)"
    )
