"""``profile_memory()``/``profile_cpu()`` blocks: this process, and the calls submitted inside.

A block profiles the code it wraps here, and marks the debuggable calls submitted inside
it (``BLOCK``), which the proxy then submits with the block's profiler, so their workers
profile them too.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from raytrace_kit import _registry
from raytrace_kit._html import card
from raytrace_kit._html import table as html_table
from raytrace_kit._options import ProfileKind, validate_profile_options
from raytrace_kit._output import paths, writer
from raytrace_kit._reports.profiles import ProfileSummary, profile_summary
from raytrace_kit._reports.reading import read_events
from raytrace_kit._worker import profilers
from raytrace_kit.exceptions import InvalidValueError, ProfileNotFoundError

__all__ = ["BLOCK", "ProfileBlock", "profile_cpu", "profile_memory"]


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
    id: str

    def _setup(self, kind: ProfileKind, path: Path | None, block_id: str) -> None:
        self.kind, self.path, self.id = kind, path, block_id
        self._token = BLOCK.set(self)  # see profile_memory(): set when the block is made

    def _leave(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError):  # left in another context
            BLOCK.reset(self._token)

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

    def __repr__(self) -> str:
        return f"<ProfileBlock {self.kind} {self.path or '(unprofiled)'} id={self.id}>"

    def _parts(self, top: int = 5) -> tuple[str, list[Path], ProfileSummary | None]:
        remote = self.remote_profiles
        try:
            summary = self.summary(top=top) if self.path is not None else None
        except Exception:
            summary = None
        where = self.path.name if self.path is not None else "ran unprofiled"
        line = f"{where}; {len(remote)} profile(s) of the calls submitted inside"
        return line, remote, summary

    def __str__(self) -> str:
        line, remote, summary = self._parts()
        parts = [f"{self.kind} block: {line}"]
        if summary is not None:
            parts.append(str(summary))
        parts.extend(f"  call profile: {path}" for path in remote)
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        return self.html_card()

    def html_card(self, top: int = 5) -> str:
        """The block as an HTML card, with ``top`` rows of its summary (a notebook shows it)."""
        line, remote, summary = self._parts(top)
        parts = [summary._repr_html_()] if summary is not None else []
        if remote:
            parts.append(
                html_table(("profiles of the calls submitted inside",), ((p,) for p in remote))
            )
        return card(f"{self.kind} block", line, *parts)


BLOCK: contextvars.ContextVar[ProfileBlock | None] = contextvars.ContextVar(
    "raytrace_kit_profile_block", default=None
)


class _PythonBlock(ProfileBlock):
    """A cProfile block, or a block that runs unprofiled (and says why)."""

    def __init__(
        self, kind: ProfileKind, path: Path | None, options: dict[str, Any], reason: str = ""
    ) -> None:
        self._options = options
        self._running: profilers.Running | None = None
        self._reason = reason  # set: why this block cannot profile (_wanted is then None)
        block_id = os.urandom(6).hex()
        self.kind, self.path, self.id = kind, None, block_id
        if reason:
            self._wanted: Path | None = None
        else:
            self._wanted = paths.block_profile_path(kind, block_id) if path is None else path

    def __enter__(self) -> ProfileBlock:
        kind = self.kind
        reason = self._reason
        if self._wanted is not None:
            started = profilers.start(kind, self._wanted, self._options, "block")
            if isinstance(started, profilers.Running):
                self._running = started
            else:
                reason = started
        if self._running is None:
            writer.warn(f"raytrace_kit: the {kind} block runs unprofiled: {reason}.", stacklevel=3)
        self._setup(kind, None if self._running is None else self._wanted, self.id)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._leave()
        if self._running is not None:
            try:
                self._running.stop()
            except Exception as exc:  # never replaces the block's own exception
                writer.report_failure("profile-stop", "cannot finish the block's profile", exc)


@_registry.cleared_on_reset
@functools.cache
def _memray_block_class() -> Any:
    """A ProfileBlock that *is* a ``memray.Tracker`` (memray imported on first use).

    ``with profile_memory():`` then calls memray's own C-level ``__enter__`` directly from
    the user's frame, with no Python frame of ours in between, so memray records the
    block's own frame and everything it calls (see ``_worker.profilers.Running``).
    """
    import memray  # noqa: PLC0415 -- imported only when a memory profile is taken

    class MemrayBlock(ProfileBlock, memray.Tracker):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass  # memray.Tracker's __cinit__ takes the arguments; _setup() sets ours

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            tb: TracebackType | None,
            /,
        ) -> bool:
            try:
                return memray.Tracker.__exit__(self, exc_type, exc, tb)
            finally:
                profilers.release("memray")
                self._leave()

    return MemrayBlock


def _memory_block(path: Path | None, options: dict[str, Any]) -> ProfileBlock:
    block_id = os.urandom(6).hex()
    file = paths.block_profile_path("memray", block_id) if path is None else path
    reason = profilers.claim("memray", "block")
    if reason is None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            block = _memray_block_class()(str(file), **profilers.memray_options(options))
        except Exception as exc:
            reason = profilers.failed("memray", "block", exc)
        else:
            block._setup("memray", file, block_id)
            return cast("ProfileBlock", block)
    return _PythonBlock("memray", None, {}, reason)  # warns on entry, runs unprofiled


def profile_memory(
    path: str | os.PathLike[str] | None = None, **memray_options: Any
) -> AbstractContextManager[ProfileBlock]:
    """Record memory allocations of a block with memray: on the driver, in a notebook, in a task.

    Debuggable task calls submitted inside the block (to Ray workers) are profiled in their
    workers too; their files are listed on ``p.remote_profiles`` after ``ray.get``.

    Args:
        path: The capture file (it must not exist); default: a new file in
            ``log_dir() / "profiles"``.
        **memray_options: ``native_traces``, ``trace_python_allocators``, ``follow_fork``,
            ``file_format``, ``memory_interval_ms`` (as for ``memray.Tracker``).

    Returns:
        A context manager giving a :class:`ProfileBlock` (``p.path``, ``p.summary()``).

    Raises:
        InvalidValueError: An option memray does not take, or ``path`` exists already (a
            ``ValueError``).

    Example:
        >>> with profile_memory() as p:
        ...     build_index()
        >>> print(p.summary())
    """
    problem = validate_profile_options("memray", memray_options)
    if problem:
        raise InvalidValueError(problem)
    if path is not None and Path(path).exists():
        msg = (
            f"profile_memory(path={str(path)!r}): the file exists, and memray never overwrites "
            "a capture. Pass a new path, delete the old file, or leave path out (a new file "
            "in log_dir()/'profiles')."
        )
        raise InvalidValueError(msg)
    return _memory_block(None if path is None else Path(path), memray_options)  # type: ignore[return-value]


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
    return _PythonBlock("cprofile", None if path is None else Path(path), cprofile_options)
