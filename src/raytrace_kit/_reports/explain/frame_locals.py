"""A failed call's traceback as reports show it: cells named, each frame's locals under it.

The report's failures (text and HTML) and ``explain`` show a traceback with the
``frames_locals`` of its ``call.end`` under each frame, after its code line::

      File "/app/job.py", line 12, in price
        return total * discount / qty
        locals:
          qty: int = 0
          discount: float = 0.5
          api_token: str of 40 chars = <redacted>

(`` = value`` only where ``log_args`` wrote values.) A frame of the record is matched to
the traceback's by file, line and function; the same frame printed several times (a
recursion) takes the record's in order, and where their counts differ only the last
(innermost) one shows, once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from raytrace_kit._html import cell_name, cell_traceback

__all__ = ["locals_lines", "traceback_with_locals"]

_FRAME = re.compile(
    r'^(?P<indent>[ |+-]*)(?:File "(?P<file>[^"]+)"|Cell (?P<cell>In \[\d+\])), '
    r"line (?P<line>\d+|None), in (?P<function>.+)$"
)
_MORE = "..."  # the name a record says how many locals it left out under (see _output.locals)
_Key = tuple[str, str, str]


def traceback_with_locals(traceback: str, frames: Iterable[Any] | None) -> str:
    """``traceback`` with this kernel's cells named (``In [3]``) and the frames' locals under them.

    ``frames`` is a call's ``frames_locals`` (``None``: the traceback as it is). A frame
    that is not ``[file, line, function, {name: description}, ...]`` is left out.
    """
    text = cell_traceback(traceback)
    records = _by_frame(frames or ())
    if not records:
        return text
    lines = text.splitlines()
    places: dict[_Key, list[int]] = {}
    for index, line in enumerate(lines):
        match = _FRAME.match(line)
        if match is not None:
            key = (match["file"] or match["cell"], match["line"], match["function"])
            places.setdefault(key, []).append(index)
    under: dict[int, list[Any]] = {}
    for key, found in places.items():
        known = records.get(key)
        if not known:
            continue
        if len(known) == len(found):
            under.update(zip(found, known, strict=True))
        else:  # a recursion the traceback shortened: the innermost, once
            under[found[-1]] = known[-1]
    shown: list[str] = []
    pending: tuple[str, list[Any]] | None = None
    for index, line in enumerate(lines):
        if pending is not None and not _below(line, pending[0]):
            shown.extend(locals_lines(pending[1], pending[0] + "  "))
            pending = None
        shown.append(line)
        if index in under:
            match = _FRAME.match(line)
            pending = ((match["indent"] if match else "  "), under[index])
    if pending is not None:
        shown.extend(locals_lines(pending[1], pending[0] + "  "))
    return "\n".join(shown) + ("\n" if text.endswith("\n") else "")


def _below(line: str, indent: str) -> bool:
    """Whether ``line`` is a frame's code (or its ``^^^`` marks), indented under its ``File``."""
    return line.startswith(indent + "  ") and _FRAME.match(line) is None


def _by_frame(frames: Iterable[Any]) -> dict[_Key, list[Any]]:
    """The record's frames by what their traceback line says: place, line, function."""
    found: dict[_Key, list[Any]] = {}
    for frame in frames:
        if not (isinstance(frame, list) and len(frame) >= 4 and isinstance(frame[3], dict)):
            continue
        filename = str(frame[0])
        place = cell_name(filename) or filename
        found.setdefault((place, str(frame[1]), str(frame[2])), []).append(frame)
    return found


def locals_lines(frame: list[Any], indent: str = "    ") -> list[str]:
    """One frame's locals as lines, ``name: description = value``, under a ``locals:`` line."""
    described: dict[Any, Any] = frame[3]
    values = frame[4] if len(frame) > 4 and isinstance(frame[4], dict) else {}
    lines = [f"{indent}locals:"]
    for name, description in described.items():
        if name == _MORE:
            lines.append(f"{indent}  ... {description}")
            continue
        value = values.get(name)
        shown = "" if value is None else " = " + _one_line(str(value))
        lines.append(f"{indent}  {name}: {description}{shown}")
    return lines


def _one_line(text: str) -> str:
    r"""A repr on one line (a DataFrame's has several): its line breaks written ``\n``."""
    return text.replace("\r", "\\r").replace("\n", "\\n")
