"""Exceptions and warnings raised by raytrace_kit.

Every error the library raises on purpose derives from :class:`RaytraceKitError`, and also
from the built-in exception a Python programmer would expect (``TypeError`` for misuse),
so ``except TypeError`` keeps working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raytrace_kit._serialization import SerializationReport

__all__ = [
    "InvalidOptionError",
    "InvalidTargetError",
    "NodeNotFoundError",
    "NotSerializableError",
    "RaytraceKitError",
    "RaytraceKitWarning",
]


class RaytraceKitError(Exception):
    """Root of every exception raised by raytrace_kit."""


class InvalidTargetError(RaytraceKitError, TypeError):
    """``@debuggable`` was applied to something it cannot instrument."""


class InvalidOptionError(RaytraceKitError, TypeError):
    """A raytrace_kit option is unknown or has the wrong type.

    Attributes:
        option: The offending keyword.
    """

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


class NotSerializableError(RaytraceKitError, TypeError):
    """Ray could not serialize a function, class, argument or return value.

    Raised before anything is submitted (or, for a return value under
    ``check="always"``, inside the worker, so ``ray.get`` raises it). The message names
    each culprit, its path and scope, and a fix.

    Attributes:
        report: The :class:`~raytrace_kit.SerializationReport` with every failure.
    """

    def __init__(self, message: str, report: SerializationReport) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[object, ...]:
        # Travels from a worker to the driver inside a RayTaskError.
        return (type(self), (str(self), self.report))


class NodeNotFoundError(RaytraceKitError, ValueError):
    """A pinned call or actor names a node that does not exist or is dead."""


class RaytraceKitWarning(UserWarning):
    """Instrumentation could not do its job; the user's call went on unaffected."""
