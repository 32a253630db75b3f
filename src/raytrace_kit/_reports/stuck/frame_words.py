"""What a running call's frames say, in words: its line, what it is blocked in or awaits.

``stuck`` says it of every call in flight (:mod:`.report`, :mod:`.waitfor`), and the
live readers of the calls they show.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from raytrace_kit._output.frames import in_stdlib

if TYPE_CHECKING:
    from raytrace_kit._reports.stuck.waitfor import Flight

__all__ = ["awaited", "blocked_in", "doing", "user_where"]

_AWAIT = re.compile(r"\bawait\s+([\w.]+)\s*\(")
# The calls into C that block a thread: what the user's own line calls when it waits.
_BLOCKING = re.compile(r"\b(sleep|acquire|wait|join|recv|recv_into|accept|select|poll|read)\(")


def user_where(stack: list[list[Any]]) -> str | None:
    """The innermost frame of the user's own code (not the standard library's), as file:line."""
    if not stack:
        return None
    frame = next((f for f in reversed(stack) if not in_stdlib(str(f[0]))), stack[-1])
    return f"{frame[0]}:{frame[1]}"


def blocked_in(stack: list[list[Any]]) -> str | None:
    """What a running call is blocked in, where its frames say so.

    ``wait() in threading.py:327`` when the innermost frame is the standard library's;
    ``sleep()`` when the user's own line is a blocking call into C (``time.sleep(40)``, a
    lock's ``acquire()``: no Python frame below it); else ``None`` (it runs).
    """
    if not stack:
        return None
    file, line, function = stack[-1][:3]
    if in_stdlib(str(file)):
        return f"{function}() in {os.path.basename(str(file))}:{line}"
    called = _BLOCKING.findall(_source(stack))
    return f"{called[-1]}()" if called else None


def awaited(stack: list[list[Any]]) -> str:
    """What a suspended coroutine's innermost line awaits: ``asyncio.sleep()``, or ``""``."""
    found = _AWAIT.search(_source(stack))
    return f"{found.group(1)}()" if found else ""


def doing(flight: Flight) -> str:
    """A running call that waits on no ref: holding its loop, awaiting, blocked, or running."""
    if flight.holds_loop_s is not None:
        return f"holding its event loop ({flight.holds_loop_s:.1f} s)"
    if flight.awaiting is not None:
        return f"awaiting {flight.awaiting}".rstrip()  # "": an await of no call's result
    return f"blocked in {flight.blocked_in}" if flight.blocked_in else "running"


def _source(stack: list[list[Any]]) -> str:
    """The innermost frame's line of source, as the snapshot kept it (``""``: none)."""
    return str(stack[-1][3]) if stack and len(stack[-1]) > 3 else ""
