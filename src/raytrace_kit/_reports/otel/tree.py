"""Where each call sits: its trace's key (the root's task id), and its task's queue time.

A span's trace is its root's: the call at the top of its chain of ``parent_call_id``. The
chain crosses processes and nodes, so the whole session is read once for it first
(:func:`read_tree`), keeping only what the chain needs: each child's parent, as integers
(a 16-hex-digit call id is one), and each parent's task id. Roots keep nothing: a call
missing from the map is a root (or was not recorded), and its children know its task id
(``parent_task_id``). A run of 500,000 calls, all children, holds about 60 MB here.

The same map, filled as ``call.start`` lines go by, serves ``--follow``
(:meth:`Tree.complete` says when a call's chain is known to its root).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from raytrace_kit._output.schema import Call, Submission
from raytrace_kit._reports.otel.spans import (
    Interruption,
    Resources,
    Span,
    nanoseconds,
    span_of,
)
from raytrace_kit._reports.reading.calls import blocks

__all__ = ["Tree", "is_submission", "read_tree"]

_CHAIN_LIMIT = 10_000  # deeper than any real tree; a loop in bad data ends here


def _key(call_id: str) -> int:
    """A call id as a dict key: the 16-hex-digit ids as their integer, others hashed."""
    if len(call_id) == 16:
        try:
            return int(call_id, 16)
        except ValueError:
            pass
    return hash(call_id)


_SUBMISSION = msgspec.json.Decoder(Submission).decode


class Tree:
    """Each recorded child's parent, each parent's task id, each task's submission time."""

    def __init__(self) -> None:
        self._parent: dict[int, int] = {}
        self._name: dict[int, str] = {}  # a parent's trace key: its task id (else call id)
        self._submitted: dict[int, int] = {}  # hash(task id) -> ns
        self._seen: set[int] | None = None  # --follow: every call whose start was read

    def follow(self) -> None:
        """Remember every call read, so that :meth:`complete` can say what is missing."""
        self._seen = set()

    def add(self, call_id: str, parent_call_id: str | None, parent_task_id: str | None) -> None:
        """Record one call (from its ``call.start`` or its joined record)."""
        if self._seen is not None:
            self._seen.add(_key(call_id))
        if parent_call_id:
            parent = _key(parent_call_id)
            self._parent[_key(call_id)] = parent
            if parent not in self._name:
                self._name[parent] = parent_task_id or parent_call_id

    def add_submission(self, raw: bytes) -> None:
        """Record a ``call.submit`` line: its task's first submission time."""
        try:
            found = _SUBMISSION(raw)
            if found.task_id:
                self._submitted.setdefault(hash(found.task_id), nanoseconds(found.timestamp))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            return

    def _top(self, call_id: str) -> int:
        """The highest recorded ancestor of a call (the root, or the call under a gap)."""
        at = _key(call_id)
        parents, steps = self._parent, 0
        chain = []
        while at in parents and steps < _CHAIN_LIMIT:
            chain.append(at)
            at = parents[at]
            steps += 1
        for link in chain[:-1]:  # the next call of this chain climbs in one step
            parents[link] = at
        return at

    def trace_key(self, call: Call) -> str:
        """The key of ``call``'s trace: its root's task id (its call id where it has none)."""
        if not call.parent_call_id:
            return call.task_id or call.call_id
        top = self._top(call.parent_call_id)
        return self._name.get(top) or call.parent_task_id or call.parent_call_id

    def complete(self, call: Call) -> bool:
        """``--follow``: whether every call of ``call``'s chain up to its root has been read."""
        seen = self._seen
        if seen is None or not call.parent_call_id:
            return True
        return self._top(call.parent_call_id) in seen  # the top has no parent recorded

    def queue_s(self, call: Call) -> float | None:
        """How long the first attempt of ``call``'s task waited after its submission.

        Never below 0, as the report says it: across machines, a clock behind another's
        would make it so.
        """
        if call.attempt or not call.task_id or not call.started:
            return None
        submitted = self._submitted.get(hash(call.task_id))
        if submitted is None:
            return None
        return max(round((nanoseconds(call.started) - submitted) / 1e9, 6), 0.0)

    def span(
        self,
        call: Call,
        resources: Resources,
        logged: tuple[list[bytes], int],
        interruption: Interruption | None = None,
    ) -> Span:
        """:func:`~.spans.span_of` ``call``, where this tree places it (trace, queue time).

        ``logged`` is the lines the call logged, and how many more were left out.
        """
        return span_of(
            call,
            self.trace_key(call),
            resources=resources,
            logged=logged[0],
            dropped=logged[1],
            queue_s=self.queue_s(call),
            interruption=interruption,
        )


_KIT_LINE = b'{"timestamp":"'  # the kit's compact lines: the event name is near the start


def is_submission(raw: bytes) -> bool:
    """Whether a line is a ``call.submit`` event (the kit's compact form, or spaced)."""
    if raw.startswith(_KIT_LINE):
        return raw.find(b'"event":"call.submit"', 0, 120) >= 0
    return b'"event": "call.submit"' in raw or b'"event":"call.submit"' in raw


def _is_start(raw: bytes) -> bool:
    if raw.startswith(_KIT_LINE):
        return raw.find(b'"event":"call.start"', 0, 120) >= 0
    return b'"event": "call.start"' in raw or b'"event":"call.start"' in raw


class _Start(msgspec.Struct, gc=False):
    """What a child's ``call.start`` says of its place: its id, its parent's ids."""

    call_id: str = ""
    parent_call_id: str | None = None
    parent_task_id: str | None = None


_START = msgspec.json.Decoder(_Start).decode


def read_tree(processes: Iterable[list[Path]]) -> Tree:
    """Read the chain of every call, and every submission, of these processes' files.

    Only the ``call.start`` lines of children are decoded (a root's place needs nothing
    kept), and ``call.submit`` lines (each process writes those it submitted in its own
    file): a million events take about a second.

    Args:
        processes: Each process's files, oldest first (``calls.distinct_processes``).
    """
    tree = Tree()
    for file in [file for group in processes for file in group]:
        for lines in blocks(file):
            for raw in lines:
                at = raw.find(b'"parent_call_id":', 0, 400)  # the kit's: in the first 400
                if at < 0 and not raw.startswith(_KIT_LINE):
                    at = raw.find(b'"parent_call_id":')
                if at >= 0 and raw[at + 17 : at + 21] != b"null" and _is_start(raw):
                    try:  # a child's start: its place in the tree (a root's needs nothing)
                        begun = _START(raw)
                    except msgspec.DecodeError:
                        continue
                    tree.add(begun.call_id, begun.parent_call_id, begun.parent_task_id)
                elif is_submission(raw):
                    tree.add_submission(raw)
    return tree
