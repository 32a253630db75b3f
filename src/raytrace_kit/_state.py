"""Process-wide state of raytrace_kit, in one place, with :func:`reset` for tests."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raytrace_kit._events import EventWriter

__all__ = ["lock", "reset", "state"]

lock = threading.Lock()


class _State:
    """Mutable process-wide state; only this module's :func:`reset` replaces it."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every cached value."""
        # Directory used while Ray is not initialized; created on first use and kept
        # for the life of the process, so files written before ray.init stay together.
        self.fallback_dir: Path | None = None
        # One open event file per directory this process has written to.
        self.writers: dict[Path, EventWriter] = {}
        # Warning keys already shown in this process (warn once, not per call).
        self.warned: set[str] = set()
        # A driver's event file, with the identity (Ray connection) it is for.
        self.driver_writer: tuple[object, EventWriter] | None = None


state = _State()


def reset() -> None:
    """Close open event files and forget every cached value (for tests)."""
    with lock:
        for writer in state.writers.values():
            writer.close()
        state.clear()
