"""Exceptions and warnings raised by raytrace_kit.

Every error the library raises on purpose derives from :class:`RaytraceKitError`, and also
from the built-in exception a Python programmer would expect (``TypeError`` for misuse,
``ValueError`` for a bad value, ``FileNotFoundError`` for a missing file), so
``except TypeError`` and friends keep working. This module imports nothing of ours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raytrace_kit._serialization.report import SerializationReport

__all__ = [
    "ClusterConnectionError",
    "CoverageError",
    "EventsNotFoundError",
    "ExportError",
    "InvalidOptionError",
    "InvalidTargetError",
    "InvalidValueError",
    "LocalModeError",
    "MissingExtraError",
    "NodeNotFoundError",
    "NotSerializableError",
    "ProfileError",
    "ProfileNotFoundError",
    "RaytraceKitError",
    "RaytraceKitWarning",
    "ReplayError",
    "UnsafeReplayFileError",
    "UsageError",
]


class RaytraceKitError(Exception):
    """Root of every exception raised by raytrace_kit."""


class InvalidTargetError(RaytraceKitError, TypeError):
    """``@debuggable`` (or ``stacks()``) was given something it cannot instrument or read."""


class InvalidOptionError(RaytraceKitError, TypeError):
    """A raytrace_kit option is unknown or has the wrong type.

    Attributes:
        option: The offending keyword.
    """

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.option))


class InvalidValueError(RaytraceKitError, ValueError):
    """An argument of a raytrace_kit function has a value it cannot use."""


class UsageError(RaytraceKitError, TypeError):
    """A raytrace_kit object was used in a way it does not support (the message says how)."""


class LocalModeError(RaytraceKitError, RuntimeError):
    """Something inside local mode would reach a Ray cluster (strict mode), or cannot be had.

    ``local_mode(strict=True)`` raises it for a plain ``@ray.remote`` call made inside the
    block, which would run on a cluster (and start one if Ray is not initialized); the
    message names the function and the fix.
    """


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


class EventsNotFoundError(RaytraceKitError, FileNotFoundError):
    """There are no event files where they were looked for."""


class MissingExtraError(RaytraceKitError, ImportError):
    """A feature needs an optional package that is not installed (the message says which).

    Raised when the feature is used, never at ``import raytrace_kit``: for example,
    exporting to an OTLP endpoint without ``pip install 'raytrace_kit[otel]'``.
    """


class ExportError(RaytraceKitError, OSError):
    """Spans could not be delivered: the endpoint refused, failed or did not answer.

    The message names the endpoint, what it said, and what to change.

    Attributes:
        status: The HTTP status the endpoint answered with (``None``: no answer).
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.status))


class ClusterConnectionError(RaytraceKitError, ConnectionError):
    """No connection to a running Ray cluster could be made (the message says why, and the fix).

    Attributes:
        reason: What stopped it, one word: ``"no-address"`` (no cluster found to attach
            to), ``"refused"`` (nothing listens there), ``"unreachable"`` (no answer),
            ``"authentication"`` (the cluster refused this process's token, or its lack of
            one) or ``"version"`` (the cluster runs another Ray or Python).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.reason))


class ProfileError(RaytraceKitError, RuntimeError):
    """A profile file could not be read or rendered (the profiler's message is included)."""


class ProfileNotFoundError(RaytraceKitError, FileNotFoundError):
    """There is no profile file where one was expected."""


class CoverageError(RaytraceKitError, RuntimeError):
    """Coverage of remote code cannot be measured as asked (the message says why and the fix).

    ``raytrace_kit.coverage()`` and ``pytest --ray-cov`` raise it when coverage.py (or its
    start-up file) is missing, or when Ray connects to a cluster whose workers were started
    outside the run and so cannot be measured.
    """


class ReplayError(RaytraceKitError, RuntimeError):
    """A failed call cannot be replayed: its inputs were not kept, or not all of them.

    The message says why (no ``capture``, an argument that cannot be pickled, over the
    size cap, an actor's state that was not kept) and what to do instead.
    """


class UnsafeReplayFileError(RaytraceKitError, PermissionError):
    """A replay file is not this user's, or others may read or change it: not unpickled.

    Unpickling runs code: a file someone else could have written is refused. The message
    names the owner or the mode, and the fix (``chmod 600`` if you trust it).
    """


class RaytraceKitWarning(UserWarning):
    """Instrumentation could not do its job; the user's call went on unaffected."""
