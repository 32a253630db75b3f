"""The parts of a cluster's join: what a node sends another of its unjoined submissions.

:meth:`joins.NodeQueues.split` packs, for each node, the submissions, starts and ends
whose other half may be there (:func:`pack_part`); each node joins the parts every node
sent it (:func:`join`) and sends back the ends of the driver's calls it joined.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from raytrace_kit._reports.cluster.times import NONE, behind_micros, from_micros, idled_s
from raytrace_kit._reports.run.packing import (
    pack_floats,
    pack_ints,
    pack_keys,
    unpack_ints,
    unpack_keys,
)
from raytrace_kit._reports.run.queues import MAX_LISTED

__all__ = ["Record", "join", "pack_part", "packed_waits"]


# A submission: (submitted, function, site, task id (the first few), index, actor, by driver,
# whether its arguments include refs: it waited for the calls that make them first)
Record = tuple[int, str, str | None, str | None, int, str | None, bool, bool]


def actor_waits(waits: Iterable[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    """Each actor's calls' count and longest time in queue."""
    found: dict[str, tuple[int, float]] = {}
    for actor, wait in waits:
        count, longest = found.get(actor, (0, 0.0))
        found[actor] = (count + 1, max(longest, wait))
    return found


def packed_waits(
    waits: dict[str, list[float]],
    backlog: dict[str, list[float]],
    first: dict[str, int],
    actors: Iterable[tuple[str, float]],
) -> dict[str, Any]:
    """What a join answers: each function's waits (packed), its first joined submission...

    ...and each actor's waits' count and longest (``backlog``: the waits while the
    worker that ran the call idled).
    """
    return {
        "waits": {name: pack_floats(values) for name, values in waits.items()},
        "backlog": {name: pack_floats(values) for name, values in backlog.items()},
        "first": first,
        "actors": actor_waits(actors),
    }


def pack_part(
    offset: int,
    rows: list[tuple[int, Record]],
    deferred: list[tuple[int, Record, int | None]],
    halves: list[tuple[int, int, int, int]],
    actors: tuple[dict[str, list[float]], list[tuple[int, int, int]]],
) -> dict[str, Any]:
    ready, before = actors
    everything = [row for _, row in rows] + [row for _, row, _ in deferred]
    names = list(dict.fromkeys(name for row in everything for name in (row[1], row[2], row[5])))
    number = {name: i for i, name in enumerate(names)}
    return {
        "offset": offset,
        "names": names,  # functions, sites and actors, numbered once
        "keys": pack_keys([key for key, _ in rows]),
        "stamps": pack_ints([row[0] for _, row in rows]),
        "functions": pack_ints([number[row[1]] for _, row in rows]),
        "sites": pack_ints([number[row[2]] for _, row in rows]),
        "index": pack_ints([row[4] for _, row in rows]),
        "actors": pack_ints([number[row[5]] for _, row in rows]),
        "by_driver": pack_ints([int(row[6]) for _, row in rows]),
        "with_args": pack_ints([int(row[7]) for _, row in rows]),
        "deferred": pack_keys([key for key, _, _ in deferred]),
        "deferred_rows": pack_ints(  # each one's index, and its task's last end here
            [
                value
                for _, row, ended in deferred
                for value in (row[4], NONE if ended is None else ended)
            ]
        ),
        "start_keys": pack_keys([key for key, _, _, _ in halves]),
        "start_stamps": pack_ints([start for _, start, _, _ in halves]),
        "end_stamps": pack_ints([end for _, _, end, _ in halves]),
        "start_idle": pack_ints([idle for _, _, _, idle in halves]),  # its worker idle since
        "ready": ready,  # the ends of the __init__ of the actors that ran here (a few each)
        # Each method call's actor's last end when it started, and since when it had been
        # busy then (flights.behind), by task.
        "before_keys": pack_keys([key for key, _, _ in before]),
        "before_stamps": pack_ints([end for _, end, _ in before]),
        "before_since": pack_ints([since for _, _, since in before]),
    }


def _actor_times(
    parts: list[dict[str, Any]],
) -> tuple[dict[str, list[float]], dict[int, tuple[int, int]]]:
    """The ends of every actor's ``__init__``, and each method's call's actor's last end.

    The latter as it was when the call started, with the start of the stretch the actor
    had been busy for then, from the parts of every node (see :func:`flights.behind`).
    """
    ready: dict[str, list[float]] = {}
    before: dict[int, tuple[int, int]] = {}
    for part in parts:
        for actor, ends in part["ready"].items():
            ready.setdefault(actor, []).extend(ends)
        times = zip(
            unpack_ints(part["before_stamps"]), unpack_ints(part["before_since"]), strict=True
        )
        before.update(zip(unpack_keys(part["before_keys"]), times, strict=True))
    return ready, before


def _halves(parts: list[dict[str, Any]]) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Each task's first start (and since when its worker idled then), and its last end."""
    started: dict[int, int] = {}
    idle: dict[int, int] = {}
    ended: dict[int, int] = {}
    for part in parts:
        for key, start, end, since in zip(
            unpack_keys(part["start_keys"]),
            unpack_ints(part["start_stamps"]),
            unpack_ints(part["end_stamps"]),
            unpack_ints(part["start_idle"]),
            strict=True,
        ):
            if start != NONE and key not in started:
                started[key], idle[key] = start, since
            if end > ended.get(key, NONE):
                ended[key] = end
    return started, idle, ended


def _rows(part: dict[str, Any]) -> Iterator[tuple[int, int, int, int, int, int, int, int]]:
    """A part's submissions: key, stamp, function, site, index, actor, by driver, with args."""
    return zip(
        unpack_keys(part["keys"]),
        unpack_ints(part["stamps"]),
        unpack_ints(part["functions"]),
        unpack_ints(part["sites"]),
        unpack_ints(part["index"]),
        unpack_ints(part["actors"]),
        unpack_ints(part["by_driver"]),
        unpack_ints(part["with_args"]),
        strict=True,
    )


def _deferred(part: dict[str, Any], ended: dict[int, int]) -> Iterator[tuple[int, int]]:
    """The driver's calls its node could not end for good: each index there, its last end."""
    values = unpack_ints(part["deferred_rows"])
    for key, at in zip(unpack_keys(part["deferred"]), range(0, len(values), 2), strict=True):
        yield values[at], max(values[at + 1], ended.get(key, NONE))


def join(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], list[tuple[bytes, bytes]]]:
    """One node's part of the join: the parts every node sent it, in the nodes' order.

    Returns each function's waits (packed) and its first joined submission (in the order
    all nodes' submissions are read), each actor's waits' count and longest, how many
    never started, and the first of those (at most a report's ``MAX_LISTED``, each with
    its ``order``, and where it was read: the ``rank`` of its node and its ``index``
    there, to ask its task id by). And, for each node, the last ends of its driver's calls
    that joined here, by their index there (:meth:`NodeQueues.ends`: node to node).
    """
    started, idle, ended = _halves(parts)
    ready, before = _actor_times(parts)
    waits: dict[str, list[float]] = {}
    backlog: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    actors: list[tuple[str, float]] = []
    never: list[dict[str, Any]] = []
    count = 0
    back: list[tuple[bytes, bytes]] = []
    for rank, part in enumerate(parts):
        offset, names = part["offset"], part["names"]
        indexes, ends = [], []
        for key, stamp, function, site, index, actor, by_driver, with_args in _rows(part):
            order = offset + index
            if by_driver and names[site]:
                indexes.append(index)
                ends.append(ended.get(key, NONE))
            begun = started.get(key)
            if begun is None:
                count += 1
                if len(never) < MAX_LISTED:  # its task id, if a report keeps it: asked later
                    never.append(
                        {
                            "order": order,
                            "rank": rank,
                            "index": index,
                            "function": names[function],
                            "submitted": from_micros(stamp),
                            "site": names[site],
                            "task_id": None,
                        }
                    )
                continue
            name, waited = names[function], max(from_micros(begun) - from_micros(stamp), 0.0)
            waits.setdefault(name, []).append(waited)
            if not names[actor] and not with_args:  # see Queues.results
                backlog.setdefault(name, []).append(idled_s(stamp, begun, idle[key]))
            first[name] = min(first.get(name, order), order)
            if names[actor]:
                waited = behind_micros(stamp, begun, before.get(key), ready.get(names[actor]))
                actors.append((names[actor], waited))
        for index, end in _deferred(part, ended):
            indexes.append(index)
            ends.append(end)
        back.append((pack_ints(indexes), pack_ints(ends)))
    return {
        **packed_waits(waits, backlog, first, actors),
        "never": never,
        "never_count": count,
    }, back
