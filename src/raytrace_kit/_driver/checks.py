"""Serializability checks before submission: the code once, the arguments per ``check``."""

from __future__ import annotations

import inspect
from typing import Any

import ray.cloudpickle

from raytrace_kit import _ray_compat
from raytrace_kit._serialization.report import (
    SerializationFailure,
    SerializationReport,
    reject,
)
from raytrace_kit._serialization.walk import check_serializable
from raytrace_kit.exceptions import NotSerializableError

__all__ = ["check_arguments", "check_code", "check_code_size", "explain"]


def check_code(python_object: Any, name: str, kind: str) -> None:
    """Check the function or class itself (its globals, closure, members).

    Raises:
        NotSerializableError: Something Ray could not serialize; nothing was submitted.
    """
    report = check_serializable(python_object, name=name)
    if not report.ok:
        reject(report, f"{kind} {name}", name)


def check_arguments(
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    error: str = "",
) -> SerializationReport | None:
    """The report on a call's arguments, named by parameter, or ``None`` if all pass."""
    failures: list[SerializationFailure] = []
    for argument, value in _named_arguments(signature, args, kwargs):
        report = check_serializable(value, name=argument, scope="argument")
        failures.extend(report.failures)
    if not failures:
        return None
    return SerializationReport(
        f"the arguments of {name}",
        ok=False,
        failures=tuple(failures),
        error=error or failures[0].error,
    )


def explain(
    python_object: Any,
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
) -> NotSerializableError | None:
    """After Ray failed at submission: the error naming what it could not serialize.

    ``None`` when neither the code nor the arguments fail: not a serialization problem,
    and Ray's own error stands.
    """
    report: SerializationReport | None = check_serializable(python_object, name=name)
    if report is not None and report.ok:
        report = check_arguments(signature, args, kwargs, name)
    if report is None:
        return None
    try:
        reject(report, f"submitting {name}", name)
    except NotSerializableError as error:
        return error


def _named_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, Any]]:
    """Arguments with their parameter names (``args[i]`` when they cannot be bound)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
    named: list[tuple[str, Any]] = []
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.extend(value.items())
        else:
            named.append((name, value))
    return named


def check_code_size(python: Any, kind: str) -> None:
    """Ray pickles the code once, at first ``.remote()``; too large raises there.

    Local mode does the same, so a function closing over 100 MiB fails as in Ray.
    ``kind``: ``"function"`` or an actor class's.

    Raises:
        ValueError: Ray's error: larger than ``FUNCTION_SIZE_ERROR_THRESHOLD``.
    """
    pickled = ray.cloudpickle.dumps(python)
    if kind == "function":  # named as Ray names them in this message
        name, what = f"{python.__module__}.{python.__name__}", "remote function"
    else:
        name, what = python.__name__, "actor"
    _ray_compat.check_function_size(pickled, name, what)
