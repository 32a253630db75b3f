"""Calls joined from events: each execution's ``call.start`` and ``call.end``, as one ``Call``.

Lines are decoded with msgspec straight into typed records holding only what a call needs;
a process's rotated files are read oldest first, so a call that spans a rotation joins.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

from raytrace_kit._output.schema import Call, CallStart

__all__ = [
    "STARTED",
    "Call",
    "Piece",
    "StartLine",
    "blocks",
    "chunks",
    "distinct_processes",
    "interrupted",
    "iter_calls",
    "join_start",
    "line_start",
    "process_calls",
    "processes",
    "unique",
]


_END = msgspec.json.Decoder(Call).decode
STARTED = operator.attrgetter("started")


def interrupted(raw: bytes) -> Call | None:
    """The call of a ``call.start`` that has no ``call.end``."""
    try:
        call = _END(raw)
    except msgspec.DecodeError:
        return None
    call.started, call.ended = call.ended or "", None
    call.rss_start_bytes, call.rss_end_bytes = call.rss_end_bytes, None
    call.rss_minus_shr_end_bytes = call.max_rss_bytes = None
    call.status = "interrupted"
    return call


_START = msgspec.json.Decoder(CallStart).decode


_ROTATED = re.compile(r"^(?P<stem>events-.+?)(?:\.(?P<number>\d+))?\.jsonl$")


def processes(files: list[Path]) -> list[list[Path]]:
    """Event files grouped by process, each group oldest first.

    Rotation renames a process's file (``events-X.jsonl`` becomes ``events-X.1.jsonl``...),
    so one call's start and end can be in two of its files: ``.2``, ``.1``, then the current.
    """
    groups: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for file in files:
        match = _ROTATED.match(file.name)
        stem = match["stem"] if match else file.name
        number = int(match["number"]) if match and match["number"] else 0
        groups.setdefault((file.parent, stem), []).append((number, file))
    return [[f for _, f in sorted(group, key=lambda item: -item[0])] for group in groups.values()]


_BLOCK = 4 * 2**20  # read files in blocks: memory stays bounded however large a file is


def blocks(file: Path) -> Iterator[list[bytes]]:
    """The lines of a file, a block's worth at a time (see :func:`chunks`)."""
    for block, size in chunks(file):
        lines = block[:size].split(b"\n")
        lines.pop()  # the empty piece after the block's last newline
        yield lines


class Piece:
    """The lines of one file that start in ``[start, stop)``: a share of a large file.

    Two pieces that meet at an offset share no line and miss none: each end is moved to the
    start of the line it falls in (see :func:`line_start`).
    """

    __slots__ = ("path", "start", "stop")

    def __init__(self, path: Path, start: int, stop: int) -> None:
        self.path, self.start, self.stop = path, start, stop

    def __getstate__(self) -> tuple[Path, int, int]:
        return self.path, self.start, self.stop

    def __setstate__(self, state: tuple[Path, int, int]) -> None:
        self.path, self.start, self.stop = state


def line_start(handle: BinaryIO, offset: int) -> int:
    """The offset of the first line that starts at or after ``offset`` (or the file's end)."""
    if offset <= 0:
        return 0
    handle.seek(offset - 1)
    at = offset - 1
    while block := handle.read(2**16):
        newline = block.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(block)
    return at


def chunks(file: Path | Piece) -> Iterator[tuple[bytes, int]]:
    """A file (or a piece of one) in blocks: ``(block, size)``, its first ``size`` bytes lines.

    Each line ends in a newline within ``size`` (the file's last is given one).
    Memory stays bounded however large a file is; lines are not split out (a million
    small objects): :func:`iter_calls` finds them in place.
    """
    path = file.path if isinstance(file, Piece) else file
    try:
        handle = path.open("rb")
    except OSError:
        return  # removed (rotated away) while we listed: nothing to report
    with handle:
        left = -1  # bytes of the piece still to read (-1: the whole file)
        if isinstance(file, Piece):
            begin, end = line_start(handle, file.start), line_start(handle, file.stop)
            handle.seek(begin)
            left = end - begin
        rest = b""
        while block := handle.read(_BLOCK if left < 0 else min(_BLOCK, left)):
            left -= len(block)
            if rest:
                block = rest + block
            last = block.rfind(b"\n") + 1
            rest = block[last:]
            if last:
                yield block, last  # not block[:last]: a copy of the block
        if rest:
            yield rest + b"\n", len(rest) + 1


class StartLine:
    """Where :func:`iter_calls` leaves the ``call.start`` line of the call it yielded last.

    For what a report shows of a call it names (a straggler's arguments): the line is at
    hand as the call goes by, so no file is searched for it afterwards.
    """

    __slots__ = ("line",)

    def __init__(self) -> None:
        self.line: bytes | None = None


_MARK = b'"event":"call.'  # the kit's compact lines: near the start
_SPACED = b'"event": "call.'  # written by another JSON writer ("key": "value")


def iter_calls(  # noqa: PLR0912, PLR0915 -- the hot loop
    files: list[Path] | list[Path | Piece],
    start: StartLine | None = None,
    others: Callable[[bytes], None] | None = None,
    logged: Callable[[bytes], object] | None = None,
) -> Iterator[Call]:
    """The calls of one process, as its files have them (end order), interrupted ones last.

    ``files`` are the process's files oldest first (see :func:`processes`), so a call whose
    start and end were rotated into two files joins. A ``call.start`` is decoded only when
    its ``call.end`` lacks what it has (files of before ``rss_start_bytes``) or never came.
    ``start``, if given, holds the ``call.start`` line of each call while it is yielded;
    ``others``, if given, is called with the line of each other ``call.*`` event
    (``call.submit``, ``call.stuck``), undecoded, in file order; ``logged``, if given, with
    every line that is no ``call.*`` event (a call's ``get_logger()`` events, read before
    the ``call.end`` of the call they were written in: for its span).

    Lines are found in place in each block (``find``, not ``split``) and a ``call.end`` is
    decoded from a view of the block: no copy of the half of the lines that ends calls.
    """
    starts: dict[str, bytes] = {}
    end = _END
    for file in files:
        for block, size in chunks(file):
            view = memoryview(block)
            find, startswith = block.find, block.startswith
            at_line = 0
            while at_line < size:  # the hot loop: a million lines take a second or two
                newline = find(b"\n", at_line)
                at = find(_MARK, at_line, at_line + 120)
                if 0 <= at < newline:
                    at += 14
                else:
                    at = find(_SPACED, at_line, newline)
                    if at < 0:
                        if logged is not None:
                            logged(block[at_line:newline])
                        at_line = newline + 1
                        continue
                    at += 15
                try:
                    if startswith(b'end"', at):
                        call = end(view[at_line:newline])
                        begun = starts.pop(call.call_id, None)
                        if begun is None:
                            pass
                        elif (
                            call.rss_start_bytes is not None
                            and begun[_STAMP_END] == _QUOTE
                            and begun[_STAMP_OFFSET] == _PLUS
                        ):
                            call.started = begun[_STAMP_START:_STAMP_END].decode()
                        else:  # another writer's line, or a call.end of before rss_start_bytes
                            join_start(call, begun)
                        if start is not None:
                            start.line = begun
                        at_line = newline + 1
                        yield call
                        continue
                    raw = block[at_line:newline]
                    if startswith(b'start"', at):  # not a user's own "call.something"
                        found = find(b'"call_id":"', at, newline) + 11 - at_line
                        close = raw.find(b'"', found)
                        if found > 10 and close > found:  # found is -1 + 11 when absent
                            starts[raw[found:close].decode()] = raw
                        else:
                            starts[_START(raw).call_id] = raw
                    elif others is not None:
                        others(raw)
                except (msgspec.DecodeError, IndexError, UnicodeDecodeError):
                    pass  # a line cut short by a killed process
                at_line = newline + 1
    for raw in starts.values():
        unended = interrupted(raw)
        if unended is not None:
            if start is not None:
                start.line = raw
            yield unended


# The kit's lines start {"timestamp":"<32 characters>", so a start time is read in place
# (another writer's shorter stamp can have a quote where the kit's ends: its offset tells).
_STAMP_START = len(b'{"timestamp":"')
_STAMP_END = _STAMP_START + len("2026-11-22T19:03:13.237701+00:00")
_STAMP_OFFSET = _STAMP_START + len("2026-11-22T19:03:13.237701")  # its "+00:00"
_QUOTE, _PLUS = ord('"'), ord("+")


def join_start(call: Call, raw: bytes) -> None:
    """Give a finished call what its ``call.start`` line has: when it started, and its RSS."""
    begun = _START(raw)
    call.started = begun.timestamp
    if call.rss_start_bytes is None:
        call.rss_start_bytes = begun.rss_bytes


def process_calls(files: list[Path], made: list[Call]) -> None:
    """Append the calls of one process (see :func:`iter_calls`)."""
    made.extend(iter_calls(files))


def distinct_processes(files: list[Path]) -> list[list[Path]]:
    """:func:`processes`, each process once.

    The same process's files found twice (a copy, a collection) count once: the copy with
    the most bytes (a copy taken while the process ran is a prefix of the other).
    """
    chosen: dict[str, tuple[int, list[Path]]] = {}
    for group in processes(files):
        stem = _ROTATED.sub(r"\g<stem>", group[-1].name)
        size = sum(_size(file) for file in group)
        if stem not in chosen or size > chosen[stem][0]:
            chosen[stem] = (size, group)
    return [group for _, group in chosen.values()]


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def unique(calls: list[Call]) -> list[Call]:
    """Each execution once: the same files twice (copied, collected) give the same call ids.

    A finished record wins over an interrupted one (a copy taken while the call ran).
    """
    if len({call.call_id for call in calls}) == len(calls):
        return calls  # the common case: no file read twice
    seen: dict[str, int] = {}
    kept: list[Call] = []
    for call in calls:
        at = seen.get(call.call_id)
        if at is None:
            seen[call.call_id] = len(kept)
            kept.append(call)
        elif kept[at].status == "interrupted" and call.status != "interrupted":
            kept[at] = call
    return kept
