"""Submissions joined to their calls' starts across nodes, without bringing them to one place.

A call's ``call.submit`` is written where it was submitted and its ``call.start`` where it
ran: a report's time in queue (and its calls never started) needs both. On each node
:class:`NodeQueues` joins what it holds both halves of; the rest is split by task key
into as many parts as there are nodes (:meth:`NodeQueues.split`), part ``j`` goes to node
``j`` (through Ray's object store: node to node, the caller passes only references), and
each node joins its part (:func:`join`). The caller gets, per node, each function's waits
packed (about a byte each) and the first calls never started: what a report of all the
files computes, in the same order, with the same floats (times are whole microseconds
here and become the floats ``queues.Clock`` makes).
"""

from __future__ import annotations

from typing import Any

import msgspec

from raytrace_kit._output.schema import Submission
from raytrace_kit._reports.packing import (
    pack_floats,
    pack_ints,
    pack_keys,
    task_key,
    unpack_ints,
    unpack_keys,
)
from raytrace_kit._reports.queues import MAX_LISTED, Clock, Queues

__all__ = ["KEEP_TASK_IDS", "NodeQueues", "from_micros", "join", "micros"]

KEEP_TASK_IDS = 4 * MAX_LISTED  # submissions whose task id a report keeps (queues.py)
_DECODE_SUBMIT = msgspec.json.Decoder(Submission).decode


def micros(stamp: str, clock: Clock | None = None) -> int:
    """A stamp as whole microseconds since the epoch, read as :class:`queues.Clock` reads it."""
    base = int((clock or Clock())(stamp[:19]))  # its whole second (parsed once a second)
    fraction = stamp[20:26] if stamp[19:20] == "." else "0"
    return base * 1_000_000 + int(fraction)


def from_micros(value: int) -> float:
    """The very float :class:`queues.Clock` gives for the stamp of :func:`micros`."""
    return float(value // 1_000_000) + (value % 1_000_000) / 1e6


class NodeQueues(Queues):
    """:class:`Queues` keyed alike in every process, with times as whole microseconds."""

    def __init__(self, *, joined: bool) -> None:
        super().__init__(joined=joined)
        self.whole = Clock()
        # key -> (submitted, function, site, task id for the first KEEP_TASK_IDS, index)
        self.records: dict[int, tuple[int, str, str | None, str | None, int]] = {}
        self.first_starts: dict[int, int] = {}

    def line(self, raw: bytes) -> None:
        if b'"event":"call.submit"' not in raw[:120]:
            super().line(raw)
            return
        try:
            record = _DECODE_SUBMIT(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # a line cut short by a killed process
        if record.task_id and record.timestamp:
            key = task_key(record.task_id)
            if key not in self.records:
                index = len(self.records)
                kept = record.task_id if index < KEEP_TASK_IDS else None
                stamp = micros(record.timestamp, self.whole)
                self.records[key] = (stamp, record.function, record.site, kept, index)

    def start(self, task_id: str, begun: str) -> None:
        key = task_key(task_id)
        if key not in self.first_starts and begun:
            self.first_starts[key] = micros(begun, self.whole)

    def here(self) -> dict[str, Any]:
        """What joins here: each function's waits (packed), its first joined submission.

        The submissions and starts that do not join here are kept for :meth:`split`.
        """
        starts = self.first_starts
        waits: dict[str, list[float]] = {}
        first: dict[str, int] = {}
        left = {}
        for key, row in self.records.items():
            begun = starts.pop(key, None)
            if begun is None:
                left[key] = row
                continue
            function = row[1]
            if function not in waits:
                waits[function], first[function] = [], row[4]
            waits[function].append(max(from_micros(begun) - from_micros(row[0]), 0.0))
        self.records = left
        return {
            "count": len(self.records) + sum(map(len, waits.values())),
            "waits": {function: pack_floats(values) for function, values in waits.items()},
            "first": first,
            "stuck": list(self.stuck.values()),
        }

    def task_ids(self, indexes: list[int]) -> dict[int, str]:
        """The task ids of the submissions read ``indexes``-th here (among those kept)."""
        wanted = set(indexes)
        return {row[4]: row[3] for row in self.records.values() if row[4] in wanted and row[3]}

    def split(self, offset: int, parts: int) -> list[dict[str, Any]]:
        """What did not join here, in ``parts`` parts by task key; part ``j`` for node ``j``.

        ``offset`` is how many submissions the nodes before this one read (the order of
        reading decides which task ids a report keeps, and which calls it lists first).
        """
        rows: list[list[tuple[int, tuple[int, str, str | None, str | None, int]]]] = [
            [] for _ in range(parts)
        ]
        for key, row in self.records.items():
            rows[key % parts].append((key, row))
        starts: list[list[tuple[int, int]]] = [[] for _ in range(parts)]
        for key, stamp in self.first_starts.items():
            starts[key % parts].append((key, stamp))
        return [_part(offset, mine, theirs) for mine, theirs in zip(rows, starts, strict=True)]


def _part(
    offset: int,
    rows: list[tuple[int, tuple[int, str, str | None, str | None, int]]],
    starts: list[tuple[int, int]],
) -> dict[str, Any]:
    functions = list(dict.fromkeys(row[1] for _, row in rows))
    sites = list(dict.fromkeys(row[2] for _, row in rows))
    number = {name: i for i, name in enumerate(functions)}
    place = {name: i for i, name in enumerate(sites)}
    return {
        "offset": offset,
        "keys": pack_keys([key for key, _ in rows]),
        "stamps": pack_ints([row[0] for _, row in rows]),
        "functions": pack_ints([number[row[1]] for _, row in rows]),
        "sites": pack_ints([place[row[2]] for _, row in rows]),
        "index": pack_ints([row[4] for _, row in rows]),
        "names": functions,
        "site_names": sites,
        "start_keys": pack_keys([key for key, _ in starts]),
        "start_stamps": pack_ints([stamp for _, stamp in starts]),
    }


def join(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One node's part of the join: the parts every node sent it, in the nodes' order.

    Returns each function's waits (packed) and its first joined submission (in the order
    all nodes' submissions are read), how many never started, and the first of those
    (at most a report's ``MAX_LISTED``, each with its ``order``, and where it was read: the
    ``rank`` of its node and its ``index`` there, to ask its task id by).
    """
    started: dict[int, int] = {}
    for part in parts:
        keys, stamps = unpack_keys(part["start_keys"]), unpack_ints(part["start_stamps"])
        for key, stamp in zip(keys, stamps, strict=True):
            started.setdefault(key, stamp)
    waits: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    never: list[dict[str, Any]] = []
    count = 0
    for rank, part in enumerate(parts):
        offset, names, sites = part["offset"], part["names"], part["site_names"]
        for key, stamp, function, site, index in zip(
            unpack_keys(part["keys"]), unpack_ints(part["stamps"]),
            unpack_ints(part["functions"]), unpack_ints(part["sites"]),
            unpack_ints(part["index"]), strict=True,
        ):  # fmt: skip
            order = offset + index
            begun = started.get(key)
            if begun is None:
                count += 1
                if len(never) < MAX_LISTED:  # its task id, if a report keeps it: asked later
                    never.append({"order": order, "rank": rank, "index": index,
                                  "function": names[function], "submitted": from_micros(stamp),
                                  "site": sites[site], "task_id": None})  # fmt: skip
                continue
            name = names[function]
            waits.setdefault(name, []).append(max(from_micros(begun) - from_micros(stamp), 0.0))
            first[name] = min(first.get(name, order), order)
    return {
        "waits": {name: pack_floats(values) for name, values in waits.items()},
        "first": first,
        "never": never,
        "never_count": count,
    }
