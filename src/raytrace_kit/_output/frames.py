"""Which frames are the kit's own: left out of what users read (tracebacks, profiles, graphs)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from raytrace_kit._output.tracebacks import KIT_DIR

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["CALL_PATH_FILES", "on_call_path", "user_frames"]

# The kit's call path: the wrappers Ray calls, the boundary and its runners, local mode's
# runners, the profiler. Known by their ends: a wrapper pickled by value carries the path
# of the driver's copy of the kit, which a worker's may not share.
CALL_PATH_FILES = tuple(
    os.path.join("raytrace_kit", room, name)
    for room, name in (
        ("_worker", "instrument.py"),
        ("_worker", "boundary.py"),
        ("_worker", "profilers.py"),
        ("_worker", "runner.py"),
        ("_local", "run.py"),
        ("_local", "async_calls.py"),
        ("_local", "call.py"),
    )
)


def on_call_path(filename: str) -> bool:
    """Whether code of ``filename`` is the kit's own, between a call's caller and its code.

    What users read leaves these frames out (tracebacks, profiles, flame graphs), as plain
    Ray shows none between its own and the user's; the kit's code the user calls
    (``get_logger()``) is the user's cost and stays.
    """
    return filename.endswith(CALL_PATH_FILES)


def user_frames(tb: TracebackType | None, *, all_kit: bool = False) -> TracebackType | None:
    """``tb`` from its first frame that is not the kit's call path (or any kit code)."""
    while tb is not None and (
        tb.tb_frame.f_code.co_filename.startswith(KIT_DIR)
        if all_kit
        else on_call_path(tb.tb_frame.f_code.co_filename)
    ):
        tb = tb.tb_next
    return tb
