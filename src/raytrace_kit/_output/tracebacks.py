"""A failed call's traceback and message as text: the kit's frames and terminal colours out.

What ``call.end`` carries of a failure (:func:`raytrace_kit._output.encode.end_members`),
cut to a size that keeps the failing frame and the error.
"""

from __future__ import annotations

import os
import re
import traceback

__all__ = ["KIT_DIR", "TRACEBACK_CHARS", "clean_text", "user_traceback"]

# A failed call's traceback is capped at this many characters: its first frames and, above
# all, its last ones (the failing frame and the error) are kept; docs/events.md says so.
TRACEBACK_CHARS = 8192
KIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_traceback(error: BaseException) -> str:
    """``error``'s traceback as Python prints it, without raytrace_kit's own frames.

    Chained exceptions (``raise ... from``, errors during handling) are kept. Longer than
    :data:`TRACEBACK_CHARS`, the middle is cut, saying how much. Never raises.
    """
    try:
        formatted = traceback.TracebackException(
            type(error), error, error.__traceback__, compact=True
        )
        for part in _chain(formatted):
            part.stack = traceback.StackSummary.from_list(
                [frame for frame in part.stack if not frame.filename.startswith(KIT_DIR)]
            )
        text = clean_text("".join(formatted.format()))
    except Exception as exc:
        return f"<traceback unavailable: {type(exc).__name__}>"
    if len(text) <= TRACEBACK_CHARS:
        return text
    head, tail = TRACEBACK_CHARS // 8, TRACEBACK_CHARS - TRACEBACK_CHARS // 8 - 64
    return f"{text[:head]}... <cut: {len(text) - head - tail} characters> ...{text[-tail:]}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def clean_text(text: str) -> str:
    """A message or traceback without terminal colours and without the kit's own frames.

    A failed child's ``RayTaskError`` carries the child worker's traceback as text (Ray's
    own formatting, coloured): its ``File ".../raytrace_kit/..."`` entries, with the code
    lines under them, are taken out as the frames of this process are.
    """
    text = _ANSI.sub("", text)
    if KIT_DIR not in text:
        return text
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.startswith('  File "'):
            skipping = line.startswith(f'  File "{KIT_DIR}')
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return "".join(kept)


def _chain(formatted: traceback.TracebackException) -> list[traceback.TracebackException]:
    seen: list[traceback.TracebackException] = []
    pending = [formatted]
    while pending:
        part = pending.pop()
        if any(part is done for done in seen):
            continue
        seen.append(part)
        pending.extend(p for p in (part.__cause__, part.__context__) if p is not None)
    return seen
