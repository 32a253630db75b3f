"""Whose code a frame runs: the kit's call path (left out of what users read), the stdlib's."""

from __future__ import annotations

import functools
import os
import threading
from typing import TYPE_CHECKING

from raytrace_kit._output.tracebacks import KIT_DIR

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["CALL_PATH_FILES", "in_stdlib", "on_call_path", "user_frames"]

# The kit's call path: the wrappers Ray calls, the boundary and its runners, local mode's
# runners, the profiler. Known by their ends: a wrapper pickled by value carries the path
# of the driver's copy of the kit, which a worker's may not share.
CALL_PATH_FILES = tuple(
    os.path.join("raytrace_kit", room, name)
    for room, name in (
        ("_worker", "instrument.py"),
        ("_worker", "boundary.py"),
        ("_worker", "on_demand.py"),
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


@functools.cache
def _stdlib_dirs() -> tuple[str, ...]:
    """The standard library's directories, each ending in a separator.

    As sysconfig names them and as its modules were loaded from (a venv's platstdlib is the
    venv's own lib/pythonX.Y). Asked on first use: sysconfig, which Ray does not import,
    costs a worker about 1.5 ms to import, and most workers never ask.
    """
    import sysconfig  # noqa: PLC0415 -- on first use, see above

    found = (
        sysconfig.get_path("stdlib"),
        sysconfig.get_path("platstdlib"),
        os.path.dirname(threading.__file__),
    )
    return tuple({os.path.join(path, "") for path in found if path})


# Installed packages, which some layouts put inside a standard library's directory
# (/usr/local/lib/python3.11/site-packages in Python's Docker images, a venv's lib/python3.11).
_PACKAGE_DIRS = ("site-packages" + os.sep, "dist-packages" + os.sep)


def in_stdlib(filename: str) -> bool:
    """Whether code of ``filename`` is the standard library's, not an installed package's.

    A package installed in a site-packages directory inside the standard library's is the
    user's (or a third party's) code, as it is anywhere else.
    """
    return any(
        filename.startswith(directory) and not filename.startswith(_PACKAGE_DIRS, len(directory))
        for directory in _stdlib_dirs()
    )
