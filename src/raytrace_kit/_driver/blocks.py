"""``profile_memory()``/``profile_cpu()`` blocks: this process, and the calls submitted inside.

A block profiles the code it wraps here, and marks the debuggable calls submitted inside
it (``BLOCK``), which the proxy then submits with the block's profiler, so their workers
profile them too.
"""

from __future__ import annotations

import contextvars
import os
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytrace_kit._options import ProfileKind, validate_profile_options
from raytrace_kit._output import paths
from raytrace_kit._reports.events import read_events
from raytrace_kit._reports.profiles import ProfileSummary, profile_summary
from raytrace_kit._worker import profilers
from raytrace_kit.exceptions import InvalidValueError, ProfileNotFoundError, RaytraceKitWarning

__all__ = ["BLOCK", "ProfileBlock", "profile_cpu", "profile_memory"]


@dataclass
class ProfileBlock:
    """What ``with profile_memory() as p`` / ``with profile_cpu() as p`` gives.

    Attributes:
        kind: ``memray`` or ``cprofile``.
        path: The file written, or ``None`` if the block ran unprofiled (see the
            ``profile.skipped`` event and the warning).
        id: Identifies the block; calls submitted inside it carry it as ``profile_block``.
    """

    kind: ProfileKind
    path: Path | None
    id: str = field(default_factory=lambda: os.urandom(6).hex())

    @property
    def remote_profiles(self) -> list[Path]:
        """Files of debuggable calls submitted inside the block and finished since.

        Found through their ``call.end`` events on this node (on one machine, that is every
        node of a local cluster). Read it after ``ray.get`` of those calls.
        """
        return [
            Path(e["profile_path"])
            for e in read_events()
            if e.get("event") == "call.end" and e.get("profile_block") == self.id
        ]

    def summary(self, top: int = 10) -> ProfileSummary:
        """The headline of the profile.

        memray: the peak and the top allocation sites; cProfile: the functions with the
        most cumulative time.

        Raises:
            ProfileNotFoundError: The block ran unprofiled (``path`` is ``None``); a
                ``FileNotFoundError``.
        """
        if self.path is None:
            msg = "this block ran unprofiled (see the profile.skipped event): no file to read"
            raise ProfileNotFoundError(msg)
        return profile_summary(self.path, top=top)


BLOCK: contextvars.ContextVar[ProfileBlock | None] = contextvars.ContextVar(
    "raytrace_kit_profile_block", default=None
)


@contextmanager
def _profile_block(
    kind: ProfileKind, path: str | os.PathLike[str] | None, options: dict[str, Any]
) -> Iterator[ProfileBlock]:
    block = ProfileBlock(kind, None)
    block.path = paths.block_profile_path(kind, block.id) if path is None else Path(path)
    running = profilers.start(kind, block.path, options, "block") if block.path else None
    if running is None:
        block.path = None
        warnings.warn(
            f"raytrace_kit: the {kind} block runs unprofiled (see the profile.skipped event).",
            RaytraceKitWarning,
            stacklevel=3,
        )
    token = BLOCK.set(block)
    try:
        yield block
    finally:
        BLOCK.reset(token)
        if running is not None:
            running.stop()


def profile_memory(
    path: str | os.PathLike[str] | None = None, **memray_options: Any
) -> AbstractContextManager[ProfileBlock]:
    """Record memory allocations of a block with memray: on the driver, in a notebook, in a task.

    Debuggable calls submitted inside the block (to Ray workers) are profiled in their
    workers too; their files are listed on ``p.remote_profiles`` after ``ray.get``.

    Args:
        path: The capture file (it must not exist); default: a new file in
            ``log_dir() / "profiles"``.
        **memray_options: ``native_traces``, ``trace_python_allocators``, ``follow_fork``,
            ``file_format``, ``memory_interval_ms`` (as for ``memray.Tracker``).

    Returns:
        A context manager giving a :class:`ProfileBlock` (``p.path``, ``p.summary()``).

    Raises:
        InvalidValueError: An option memray does not take (a ``ValueError``).

    Example:
        >>> with profile_memory() as p:
        ...     build_index()
        >>> print(p.summary())
    """
    problem = validate_profile_options("memray", memray_options)
    if problem:
        raise InvalidValueError(problem)
    return _profile_block("memray", path, memray_options)


def profile_cpu(
    path: str | os.PathLike[str] | None = None, **cprofile_options: Any
) -> AbstractContextManager[ProfileBlock]:
    """Profile CPU time of a block with cProfile; debuggable calls inside are profiled too.

    Args:
        path: The ``.prof`` file to write; default: a new file in ``log_dir() / "profiles"``.
        **cprofile_options: ``timeunit``, ``subcalls``, ``builtins`` (as for
            ``cProfile.Profile``).

    Returns:
        A context manager giving a :class:`ProfileBlock` (``p.path``, ``p.summary()``).

    Raises:
        InvalidValueError: An option cProfile does not take (a ``ValueError``).
    """
    problem = validate_profile_options("cprofile", cprofile_options)
    if problem:
        raise InvalidValueError(problem)
    return _profile_block("cprofile", path, cprofile_options)
