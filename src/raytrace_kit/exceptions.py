"""Exceptions and warnings raised by raytrace_kit.

Every error the library raises on purpose derives from :class:`RaytraceKitError`, and also
from the built-in exception a Python programmer would expect (``TypeError`` for misuse),
so ``except TypeError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "InvalidOptionError",
    "InvalidTargetError",
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


class RaytraceKitWarning(UserWarning):
    """Instrumentation could not do its job; the user's call went on unaffected."""
