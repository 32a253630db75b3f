"""What the output room keeps for this process: open event files, directories, warnings shown.

Registered with :mod:`raytrace_kit._registry`: a reset closes the files and forgets all; a
forked child forgets the parent's files (it opens its own, named by its pid) and stays in
the parent's session directory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit import _registry

if TYPE_CHECKING:
    from raytrace_kit._output.writer import EventWriter
    from raytrace_kit._process import ProcessIdentity

__all__ = ["OutputState", "state"]


class OutputState:
    """Every mutable value of the output room; see the module's docstring."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget every value (the caller closes the files first)."""
        self.fallback_dir: Path | None = None  # log dir while Ray is not initialized
        self.last_ray_log_dir: Path | None = None  # the log dir of the last Ray session
        self.writers: dict[Path, EventWriter] = {}  # one open event file per directory
        self.worker_writer: EventWriter | None = None  # a worker's file, resolved once
        self.driver_writer: tuple[ProcessIdentity, EventWriter] | None = None
        self.warned: set[str] = set()  # warning keys shown already (warn once)
        self.identity_members: tuple[ProcessIdentity, str] | None = None  # rendered once
        self.clock: tuple[int, str] = (-1, "")  # the current second, formatted once
        self.echo = False  # get_logger() events also shown here (see logger.echo)
        # call.submit records not yet written, one tuple each (see .submissions), and what
        # tells the kit's thread that a batch has begun (set when the thread starts).
        self.submissions: list[tuple[Any, ...]] = []
        self.wake: Callable[[], None] | None = None

    def reset(self) -> None:
        """Close this process's event files and forget everything."""
        with self.lock:
            for writer in self.writers.values():
                writer.close()
            self.clear()

    def after_fork(self) -> None:
        """A forked child: the parent's files are not its own; the session directory is."""
        self.lock = threading.Lock()
        writers, fallback_dir = list(self.writers.values()), self.fallback_dir
        self.clear()
        self.fallback_dir = fallback_dir
        for writer in writers:
            writer.forget()


state = OutputState()
_registry.register(state.reset, state.after_fork, layer=_registry.OUTPUT)
