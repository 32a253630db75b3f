"""Calls, failures and nodes in event files, counted by their bytes, without decoding.

The kit renders each ``call.start`` and ``call.end`` in one fixed shape
(``_output/encode.py``: timestamp, level, event, in that order, no spaces), so counting
two byte strings, block by block, counts the calls and the failures: a million events in
well under a second, against seconds to decode them (``benchmarks/sessions.py``). A file
in another shape (written by hand, or by something else) is decoded line by line.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import msgspec

from raytrace_kit._reports.reading.calls import distinct_processes

__all__ = ["Counts", "count", "has_submissions"]

_BLOCK = 8 * 2**20
_KIT_LINE = b'{"timestamp":"'  # how every line the kit renders begins
_START = b'"event":"call.start"'
_END = b'"event":"call.end"'
_FAILED = b'"level":"error","event":"call.end"'  # the kit's call.end of a call that raised


@dataclass(frozen=True)
class Counts:
    """What the event files of a run hold, counted without decoding the kit's own lines."""

    calls: int
    failures: int
    nodes: int
    processes: int


class _Outcome(msgspec.Struct):
    event: str = ""
    status: str | None = None


_DECODE = msgspec.json.Decoder(_Outcome).decode


def _count_file(path: Path) -> tuple[int, int, int]:
    """``call.start`` lines, ``call.end`` lines and failures (ends with an error) in a file."""
    try:
        handle = path.open("rb")
    except OSError:
        return 0, 0, 0  # removed (rotated away) since it was listed
    starts = ends = failures = 0
    with handle:
        block = handle.read(_BLOCK)
        if not block.startswith(_KIT_LINE):  # not the kit's rendering: decode each line
            handle.seek(0)
            for line in handle:
                try:
                    item = _DECODE(line)
                except msgspec.DecodeError:
                    continue
                starts += item.event == "call.start"
                ends += item.event == "call.end"
                failures += item.event == "call.end" and item.status == "error"
            return starts, ends, failures
        rest = b""
        while block:
            data = rest + block
            cut = data.rfind(b"\n") + 1  # whole lines only: a pattern never spans two blocks
            starts += data.count(_START, 0, cut)
            ends += data.count(_END, 0, cut)
            failures += data.count(_FAILED, 0, cut)
            rest = data[cut:]
            block = handle.read(_BLOCK)
    return starts, ends, failures  # a last line without its newline was cut off: not counted


def count(files: list[Path]) -> Counts:
    """Calls, failures, nodes and processes in event files (a process found twice, once).

    A process's calls are its starts, or its ends where it has more of those (a start
    written to another session's files, as a local call across ``ray.init`` can): a
    process with both interrupted calls and such ends counts the larger of the two.
    """
    groups = distinct_processes(files)
    calls = failures = 0
    for group in groups:
        starts = ends = 0
        for file in group:
            started, ended, failed = _count_file(file)
            starts += started
            ends += ended
            failures += failed
        calls += max(starts, ends)
    nodes = {g[-1].name.split("-")[1] for g in groups if g[-1].name.count("-") >= 2}
    return Counts(calls, failures, len(nodes), len(groups))


_HEAD = 256 * 1024  # a submitting process writes its first records early: looked at first
_SUBMIT_MARK = b'"event":"call.submit"'


def has_submissions(files: list[Path]) -> bool:
    """Whether any of these event files holds a ``call.submit`` (a byte search, no decoding).

    The start of every file is searched before the rest of any: the driver's file, or a
    parent's, has one near its start, so a session with submissions is known at once.
    """
    for whole in (False, True):
        for file in files:
            try:
                with (
                    file.open("rb") as handle,
                    mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
                ):
                    if whole and len(data) <= _HEAD:
                        continue  # searched whole already
                    if data.find(_SUBMIT_MARK, 0, len(data) if whole else _HEAD) >= 0:
                        return True
            except (OSError, ValueError):  # empty (mmap refuses), or gone
                continue
    return False
