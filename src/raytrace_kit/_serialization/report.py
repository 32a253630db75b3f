"""The verdict of a serializability check: failures, their fixes, the error and its event."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from raytrace_kit._html import card, table
from raytrace_kit._output import encode, writer
from raytrace_kit.exceptions import NotSerializableError

__all__ = [
    "Scope",
    "SerializationFailure",
    "SerializationReport",
    "error_message",
    "fix_for",
    "reject",
]

Scope = Literal["global", "nonlocal", "attribute", "item", "argument", "return"]


@dataclass(frozen=True, slots=True)
class SerializationFailure:
    """One value that Ray cannot serialize.

    Attributes:
        name: How to reach it from its parent, e.g. ``pool``, ``config['pool']``,
            ``handlers[2]``, ``self.lock``.
        path: The names from the checked object down to it, e.g.
            ``('special_business', 'pool')``.
        scope: Where the reference lives: ``global``, ``nonlocal`` (captured from an
            enclosing function), ``attribute``, ``item`` (inside a container),
            ``argument`` or ``return``.
        type_name: The type of the value, e.g. ``multiprocessing.pool.Pool``.
        error: What the serializer said.
        safe_name: ``name`` with dict keys and set members given by position and type
            (``config[<str key #0>]``): what the ``serialization.fail`` event records, as
            the keys of call data may be secrets.
        safe_path: ``path`` in the same way.
    """

    name: str
    path: tuple[str, ...]
    scope: Scope
    type_name: str
    error: str
    safe_name: str = ""
    safe_path: tuple[str, ...] = ()

    @property
    def dotted_path(self) -> str:
        """The path as one expression: ``process.config['pool']``."""
        text = ""
        for part in self.path:
            text += part if part.startswith("[") or not text else f".{part}"
        return text

    @property
    def fix(self) -> str:
        """A fix that fits the scope."""
        return fix_for(self)


@dataclass(frozen=True, slots=True)
class SerializationReport:
    """The verdict of :func:`check_serializable` on one object.

    Attributes:
        target: What was checked (its name).
        ok: Whether Ray can serialize it.
        failures: Every value found that Ray cannot serialize (empty when ``ok``).
        error: The serializer's message for the object as a whole, when not ``ok``.
    """

    target: str
    ok: bool
    failures: tuple[SerializationFailure, ...] = ()
    error: str = ""

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"{self.target}: serializable"
        lines = [f"{self.target}: NOT serializable ({self.error})"]
        for failure in self.failures:
            lines.append(f"└─ {failure.dotted_path}  [{failure.scope}] {failure.type_name}")
            lines.append(f"     error: {failure.error}")
            lines.append(f"     fix:   {failure.fix}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``, not the fields."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        if self.ok:
            return card("Serializable", self.target)
        rows = [(f.dotted_path, f.scope, f.type_name, f.error, f.fix) for f in self.failures]
        headers = ("value", "scope", "type", "error", "fix")
        return card("Not serializable", f"{self.target}: {self.error}", table(headers, rows))

    def raise_if_failed(self, context: str, *, redact: bool = False) -> None:
        """Raise :class:`NotSerializableError` naming the culprits, if not ``ok``.

        Raises:
            NotSerializableError: The report has failures.
        """
        if not self.ok:
            raise self.exception(context, redact=redact)

    def exception(self, context: str, *, redact: bool = False) -> NotSerializableError:
        """The :class:`NotSerializableError` that names this report's culprits and fixes."""
        return NotSerializableError(error_message(self, context, redact=redact), self)


def fix_for(failure: SerializationFailure) -> str:
    """A fix for one failure, phrased for where the value lives."""
    name = failure.name
    owner = failure.path[0] if failure.path else "the task"
    if failure.scope == "global":
        return (
            f"'{name}' is a module global that {owner} uses: create it inside the function, "
            "pass what it needs as an argument, or keep it in an actor and call the actor"
        )
    if failure.scope == "nonlocal":
        return (
            f"'{name}' is captured from an enclosing function: create it inside the remote "
            "function, or pass it as an argument"
        )
    if failure.scope == "attribute":
        return (
            f"attribute '{name}' cannot travel: create it lazily in the worker, leave it out "
            "of the pickled state (__getstate__/__reduce__), or keep the object in an actor"
        )
    if failure.scope == "item":
        return (
            f"element {failure.dotted_path} cannot travel: remove it from the container "
            "and create it in the worker, or keep it in an actor"
        )
    if failure.scope == "argument":
        return (
            f"argument '{name}' cannot be sent to a worker: pass the data or settings needed "
            "to build it (a path, a config) and build it inside the task or actor"
        )
    return "the return value cannot be sent back: return plain data (lists, dicts, arrays)"


def error_message(report: SerializationReport, context: str, *, redact: bool = False) -> str:
    """The message of a :class:`NotSerializableError` for ``report``.

    ``redact``: name dict keys and set members by position and type (the message leaves
    this process, as a worker's error does).
    """
    lines = [f"{context}: Ray cannot serialize {report.target} ({report.error})."]
    for failure in report.failures:
        if redact and failure.safe_path:
            failure = dataclasses.replace(failure, name=failure.safe_name, path=failure.safe_path)  # noqa: PLW2901
        lines.append(
            f"  - {failure.dotted_path} [{failure.scope}, {failure.type_name}]: "
            f"{failure.error}. Fix: {failure.fix}."
        )
    return "\n".join(lines)


def reject(
    report: SerializationReport, context: str, function: str, *, redact: bool = False
) -> NoReturn:
    """Log a ``serialization.fail`` event, then raise :class:`NotSerializableError`.

    The event names the culprits (name, path, scope, type), never their values: dict keys
    and set members are given by position and type.

    Raises:
        NotSerializableError: Always, carrying ``report``.
    """
    failures = [
        (f.safe_name or f.name, f.safe_path or f.path, str(f.scope), f.type_name)
        for f in report.failures
    ]
    fields = encode.serialization_fields(function, report.target, context, failures)
    writer.emit("serialization.fail", "error", fields)
    raise report.exception(context, redact=redact)
