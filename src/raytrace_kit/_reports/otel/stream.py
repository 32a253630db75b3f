"""A session's spans, streamed: one process's calls at a time, interrupted calls last.

Two passes over the files: the first reads every call's chain (:func:`.tree.read_tree`),
the second joins each call's start and end (``calls.iter_calls``), keeps the lines it
logged until its end goes by, and makes its span. Memory holds the chains, the calls
running at a point of one process's files, and their lines: not the calls.

A call without an end is a span too when its process is gone: it ends at the last line
its process wrote, with status ERROR and, where Ray's logs recorded the worker's death,
its cause. A call whose process still runs here is still running: it is left out (and
counted); export again once it ends, or use ``--follow``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.explain.linking import deaths_of, still_running
from raytrace_kit._reports.otel.spans import (
    EVENT_LIMIT,
    Interruption,
    Resources,
    Span,
    nanoseconds,
)
from raytrace_kit._reports.otel.tree import Tree, read_tree
from raytrace_kit._reports.reading.calls import distinct_processes, iter_calls
from raytrace_kit._reports.reading.columns import first_last_stamps

if TYPE_CHECKING:
    from raytrace_kit._reports.reading.session import Session

__all__ = [
    "Logged",
    "SpanCounts",
    "interrupted_spans",
    "last_heard_ns",
    "resources",
    "session_spans",
]


class SpanCounts(msgspec.Struct):
    """What an export sent: spans, traces (roots' first attempts), failures."""

    spans: int = 0
    traces: int = 0
    errors: int = 0
    interrupted: int = 0
    running: int = 0  # calls still running, left out

    def add(self, span: Span) -> None:
        """Count one span sent."""
        self.spans += 1
        attributes = span.attributes
        if not span.parent_span_id and not attributes.get("ray.attempt"):
            self.traces += 1
        if span.status_code:
            if attributes.get("ray.call.status") == "interrupted":
                self.interrupted += 1
            else:
                self.errors += 1

    def __str__(self) -> str:
        traces = "trace" if self.traces == 1 else "traces"
        said = f"{self.spans} spans in {self.traces} {traces} ({self.errors} failed"
        if self.interrupted:
            said += f", {self.interrupted} interrupted"
        said += ")"
        if self.running:
            said += (
                f"; {self.running} calls still running were left out (their span ids will "
                "not change: export again when they end)"
            )
        return said


class Logged:
    """The lines each running call of one process logged, until its span takes them.

    A line is a call's if it carries its ``call_id``: its ``get_logger()`` events, and the
    kit's own events about it (``call.stuck``: where it was when it ran past its
    ``stuck_after``). ``call.submit`` lines name the submitting call as ``parent_call_id``:
    they are no span's events.
    """

    def __init__(self) -> None:
        self.lines: dict[str, list[bytes]] = {}
        self.dropped: dict[str, int] = {}

    def __call__(self, raw: bytes) -> None:
        """Keep a line that belongs to a call (it carries a ``call_id``)."""
        at = raw.find(b'"call_id":"')
        if at < 0:
            return
        at += 11
        call_id = raw[at : raw.find(b'"', at)].decode("ascii", "replace")
        kept = self.lines.setdefault(call_id, [])
        if len(kept) < EVENT_LIMIT:
            kept.append(raw)
        else:
            self.dropped[call_id] = self.dropped.get(call_id, 0) + 1

    def take(self, call_id: str) -> tuple[list[bytes], int]:
        """The lines of a call that ended, and how many more were left out."""
        return self.lines.pop(call_id, []), self.dropped.pop(call_id, 0)


def last_heard_ns(files: list[Path]) -> int:
    """When a process last wrote: the time of the last line of its newest file."""
    stamps = first_last_stamps(files[-1]) if files else []
    try:
        return nanoseconds(stamps[-1]) if stamps else 0
    except ValueError:
        return 0


def resources(session: Session, service_name: str) -> Resources:
    """The resources of a session's processes, with each node's host name where known.

    A collected folder names each node's host in ``collect.json`` (as its raylet reported
    it). A Ray session directory read in place holds the files of the nodes of this
    machine: its name. Otherwise the host is not known, and not said.
    """
    root = session.root if session.root.is_dir() else session.root.parent
    record = root / "collect.json"
    if record.is_file():
        try:
            nodes = json.loads(record.read_text()).get("nodes", {})
        except (OSError, ValueError, AttributeError):
            nodes = {}
        found = {
            node_id: str(entry["hostname"])
            for node_id, entry in nodes.items()
            if isinstance(entry, dict) and entry.get("hostname")
        }
        for node_id, entry in nodes.items():  # nodes of one machine: copied once
            if isinstance(entry, dict) and entry.get("node") in found:
                found.setdefault(node_id, found[entry["node"]])
        return Resources(service_name, found)
    if (root / "logs" / "raytrace_kit").is_dir() and root.name.startswith("session_"):
        return Resources(service_name, host=socket.gethostname())
    return Resources(service_name)


def session_spans(
    session: Session, *, service_name: str = "ray", counts: SpanCounts | None = None
) -> Iterator[Span]:
    """Every span of a session, process by process, the interrupted calls last.

    Args:
        session: The session (:func:`raytrace_kit.open_session`).
        service_name: Every span's ``service.name``.
        counts: Where to count the calls left out (still running).
    """
    groups = distinct_processes(session.files)
    tree = read_tree(groups)
    made = resources(session, service_name)
    unended: list[tuple[Call, tuple[list[bytes], int], int]] = []
    for files in groups:
        logged = Logged()
        for call in iter_calls(files, others=logged, logged=logged):
            lines = logged.take(call.call_id)
            if call.status == "interrupted":
                unended.append((call, lines, last_heard_ns(files)))
                continue
            yield tree.span(call, made, lines)
    yield from interrupted_spans(session, tree, made, unended, counts)


def interrupted_spans(
    session: Session | None,
    tree: Tree,
    made: Resources,
    unended: list[tuple[Call, tuple[list[bytes], int], int]],
    counts: SpanCounts | None,
) -> Iterator[Span]:
    """The spans of calls without an end whose process is gone; the running ones counted.

    ``unended``: each call, its logged lines (and how many more), when its process was
    last heard of (ns).
    """
    over = [entry for entry in unended if not still_running(entry[0].pid, entry[0].started)]
    if counts is not None:
        counts.running += len(unended) - len(over)
    deaths = deaths_of([call for call, *_ in over], session) if session and over else {}
    for call, lines, last in over:
        death = deaths.get(call.call_id)
        cause = death.cause if death is not None else ""
        yield tree.span(call, made, lines, Interruption(last, cause))
