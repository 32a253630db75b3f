"""The samples file of one process: frames interned once, sample counts written each second.

``samples-<node id prefix>-<pid>.jsonl`` beside the event file, JSON Lines, one record a
line, each with ``k`` (its kind):

- ``process``: first, once: ``pid``, ``node_id``, ``worker_id``, ``hz`` (the rate),
  ``format`` (1), ``t`` (Unix time); a driver's also ``role`` (``driver``) and ``script``;
- ``frame``: ``id``, ``name`` (the function's qualified name), ``file``, ``line``: one
  place in the code, written once per process, before the first stack that holds it;
- ``stack``: ``id``, ``frames`` (frame ids, outermost first): written once;
- ``thread``: ``id``, ``ident``, ``name``;
- ``call``: ``id``, ``call_id``, ``function``, ``actor_id``, ``task_id``: an instrumented
  call, written once per flush interval it was seen in (id 0 is "no call");
- ``counts``: ``t`` (Unix time at the flush), ``s`` (seconds it covers), ``rows``: one
  ``[stack, thread, call, waiting (0/1), samples]`` per distinct sample of the interval;
- ``capped``: the file reached its cap (``bytes``); sampling stopped in this process.

Each flush is one ``os.write`` of whole lines, definitions before the counts that name
them: a ``kill -9`` loses at most the interval not yet flushed, never a half record.
The file stops growing at :func:`max_bytes` (64 MiB by default).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from types import CodeType
from typing import Any

from raytrace_kit._output import writer

__all__ = ["DEFAULT_MAX_BYTES", "ENV_MAX_BYTES", "FORMAT", "SamplesFile", "max_bytes"]

FORMAT = 1
ENV_MAX_BYTES = "RAYTRACE_SAMPLE_MAX_BYTES"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_ROTATION_MARGIN = 4096  # under the event files' rotation size: a samples file never rotates


def max_bytes() -> int:
    """The cap of one process's samples file: ``RAYTRACE_SAMPLE_MAX_BYTES``, else 64 MiB.

    Never over the event files' rotation size (:func:`~.writer.rotation_limits`): a rotated
    samples file would lose the frames its later counts name.
    """
    try:
        cap = int(os.environ.get(ENV_MAX_BYTES) or DEFAULT_MAX_BYTES)
    except ValueError:
        cap = DEFAULT_MAX_BYTES
    rotation = writer.rotation_limits()[0]
    if rotation:
        cap = min(cap, rotation - _ROTATION_MARGIN)
    return max(cap, _ROTATION_MARGIN)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


class SamplesFile:
    """One process's samples: the interning tables, this interval's counts, the file.

    The sampler fills :attr:`frames`, :attr:`stacks` and :attr:`counts` itself (its hot
    loop reads the dicts directly); new definitions wait in :attr:`pending` until
    :meth:`flush` writes them with the counts.
    """

    def __init__(self, path: Path | None, header: dict[str, Any]) -> None:
        self.path: Path | None = None
        self.cap = max_bytes()
        self.size = 0
        self.capped = False
        self.pending: list[str] = [""]  # the header first: placed with the path
        self.frames: dict[tuple[CodeType, int], int] = {}
        self.stacks: dict[tuple[int, ...], int] = {}
        self.threads: dict[int, int] = {}
        self.calls: dict[Any, int] = {}
        self.counts: Counter[tuple[int, int, int, int]] = Counter()
        self._next_call = 1
        self._writer: writer.EventWriter | None = None
        self._since = time.monotonic()
        if path is not None:
            self.place(path, header)

    def place(self, path: Path, header: dict[str, Any]) -> None:
        """Name the file (a driver's, once Ray is up) and its ``process`` record."""
        self.path, self._writer = path, writer.EventWriter(path)
        self.pending[0] = _line({"k": "process", "format": FORMAT, **header})

    def pending_bytes(self) -> int:
        """About how much waits to be written (a file not yet placed keeps it all)."""
        return sum(map(len, self.pending))

    def frame(self, code: CodeType, line: int) -> int:
        """The id of a place in the code, defined on first use."""
        frame_id = self.frames[code, line] = len(self.frames) + 1
        name = getattr(code, "co_qualname", code.co_name)  # Python 3.11+: Class.method
        self.pending.append(
            _line({"k": "frame", "id": frame_id, "name": name, "file": code.co_filename,
                   "line": line})
        )  # fmt: skip
        return frame_id

    def stack(self, frames: tuple[int, ...]) -> int:
        """The id of a stack (frame ids, outermost first), defined on first use."""
        stack_id = self.stacks[frames] = len(self.stacks) + 1
        self.pending.append(_line({"k": "stack", "id": stack_id, "frames": list(frames)}))
        return stack_id

    def thread(self, ident: int, name: str) -> int:
        """The id of a thread, defined on first use."""
        thread_id = self.threads[ident] = len(self.threads) + 1
        self.pending.append(_line({"k": "thread", "id": thread_id, "ident": ident, "name": name}))
        return thread_id

    def call(self, key: Any, fields: dict[str, Any]) -> int:
        """The id of an instrumented call in this interval (``key`` names it), defined on use."""
        call_id = self.calls[key] = self._next_call
        self._next_call += 1
        self.pending.append(_line({"k": "call", "id": call_id, **fields}))
        return call_id

    def flush(self) -> bool:
        """Write what this interval holds in one ``os.write``; ``False`` once capped or failed."""
        if self.capped:
            return False
        now = time.monotonic()
        rows = [[*key, count] for key, count in self.counts.items()]
        self.counts.clear()
        self.calls.clear()  # calls are named again in the next interval they are seen in
        if rows:
            span = round(now - self._since, 3)
            self.pending.append(_line({"k": "counts", "t": time.time(), "s": span, "rows": rows}))
        self._since = now
        if not self.pending:
            return True
        if self._writer is None:
            return True  # not placed yet: kept, and written with the header once it is
        data = "".join(self.pending).encode()
        self.pending.clear()
        if self.size + len(data) > self.cap:
            self.capped = True
            data = _line({"k": "capped", "bytes": self.size}).encode()
        try:
            self._writer.write(data)
        except OSError as exc:
            writer.report_failure("samples", f"cannot write the samples file {self.path}", exc)
            self.capped = True
        self.size += len(data)
        return not self.capped

    def close(self) -> None:
        """Close the file's descriptor."""
        if self._writer is not None:
            self._writer.close()
