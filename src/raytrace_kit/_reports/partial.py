"""One node's share of a cluster's report, computed where its files are (``report(address=)``).

A :class:`NodeReport` reads the event files of one node's directory once, into the same
:class:`~raytrace_kit._reports.tally.Tally` a report of those files would fill, and
answers the caller's three questions (``merge.py`` asks them, in turn):

1. :meth:`NodeReport.prepare`: its drivers' records (small) and whether it holds
   submission records, which decide what the tally must keep.
2. :meth:`NodeReport.tally`: its tally, as what merges: counts, each function's durations
   packed exactly (``packing.py``: about a third of a byte a call), the largest figures,
   the failures, the first calls without an end; the submissions whose calls did not
   start here and the first starts of calls not submitted here (the only per-call items
   that travel whole: their other half is on another node); each parent's children's
   spans, unless they overlap here (then one flag says so).
3. :meth:`NodeReport.details`: what the merged tally turned out to need by name: the
   functions of some parents, the lanes the pictures draw, Ray's records of some deaths.

The node keeps its tally between the questions (the reader is an actor, ``_driver``).
"""

from __future__ import annotations

import itertools
from array import array
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Submission
from raytrace_kit._reports.calls import StartLine, distinct_processes, iter_calls
from raytrace_kit._reports.deaths import find_ray_logs, worker_deaths
from raytrace_kit._reports.driver import DRIVER_GLOB, Waited, read_driver
from raytrace_kit._reports.linking import still_running
from raytrace_kit._reports.packing import pack_floats, pack_ints, pack_keys, task_key
from raytrace_kit._reports.queues import MAX_LISTED, Queues, has_submissions
from raytrace_kit._reports.sessions import EVENT_GLOB
from raytrace_kit._reports.tally import Tally

__all__ = ["KEEP_TASK_IDS", "NodeReport", "from_micros", "hex_key", "micros"]

KEEP_TASK_IDS = 4 * MAX_LISTED  # submissions whose task id a report keeps (queues.py)
_OVERLAP_S = 1e-4  # children closer than this count as one after the other (rules.py)
_DECODE_SUBMIT = msgspec.json.Decoder(Submission).decode


def hex_key(task_id: str) -> str:
    """A task id as the 16 hex digits of its key: how task ids travel in waits."""
    return f"{task_key(task_id):016x}"


class _Seconds:
    """Whole seconds of ISO 8601 stamps, parsed once per second (as ``queues._Clock``)."""

    def __init__(self) -> None:
        self.known: dict[str, int] = {}

    def __call__(self, stamp: str) -> int:
        whole = stamp[:19]
        base = self.known.get(whole)
        if base is None:
            base = self.known[whole] = int(datetime.fromisoformat(whole + "+00:00").timestamp())
            if len(self.known) > 100_000:
                self.known.clear()
        return base


def micros(stamp: str, whole: _Seconds | None = None) -> int:
    """A stamp as whole microseconds since the epoch, read as ``queues._Clock`` reads it."""
    base = (whole or _Seconds())(stamp)
    fraction = stamp[20:26] if stamp[19:20] == "." else "0"
    return base * 1_000_000 + int(fraction)


def from_micros(value: int) -> float:
    """The very float ``queues._Clock`` gives for the stamp of :func:`micros`."""
    return float(value // 1_000_000) + (value % 1_000_000) / 1e6


class _NodeQueues(Queues):
    """:class:`Queues` keyed the same in every process, with times as whole microseconds."""

    def __init__(self, *, joined: bool) -> None:
        super().__init__(joined=joined)
        self.whole = _Seconds()
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

    def partial(self) -> dict[str, Any]:
        """Joined here: waits per function; not joined here: both halves, packed."""
        starts = self.first_starts
        waits: dict[str, list[float]] = {}
        first: dict[str, int] = {}  # each function's first joined submission (its order)
        open_keys, open_rows = [], []
        for key, row in self.records.items():
            begun = starts.pop(key, None)
            if begun is None:
                open_keys.append(key)
                open_rows.append(row)
                continue
            function = row[1]
            if function not in waits:
                waits[function], first[function] = [], row[4]
            waits[function].append(max(from_micros(begun) - from_micros(row[0]), 0.0))
        functions = list(dict.fromkeys(row[1] for row in open_rows))
        sites = list(dict.fromkeys(row[2] for row in open_rows))
        number = {name: i for i, name in enumerate(functions)}
        place = {name: i for i, name in enumerate(sites)}
        return {
            "count": len(self.records),
            "waits": {function: pack_floats(values) for function, values in waits.items()},
            "first": first,
            "open": {
                "keys": pack_keys(open_keys),
                "stamps": pack_ints([row[0] for row in open_rows]),
                "functions": pack_ints([number[row[1]] for row in open_rows]),
                "sites": pack_ints([place[row[2]] for row in open_rows]),
                "index": pack_ints([row[4] for row in open_rows]),
                "names": functions,
                "site_names": sites,
                "task_ids": {row[4]: row[3] for row in open_rows if row[3] is not None},
            },
            "starts": {"keys": pack_keys(list(starts)), "stamps": pack_ints(list(starts.values()))},
            "stuck": list(self.stuck.values()),
        }


class _ByKey(dict[str, Waited | None]):
    """The tasks a driver's long waits named, by :func:`hex_key`: a tally's ``waited``.

    A tally looks calls up by their task id; the caller sent keys (8 bytes, not 48).
    """

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, str) and super().__contains__(hex_key(task_id))

    def __getitem__(self, task_id: str) -> Waited | None:
        return super().__getitem__(hex_key(task_id))

    def __setitem__(self, task_id: str, value: Waited | None) -> None:
        super().__setitem__(hex_key(task_id), value)

    def found(self, key: str) -> Waited | None:
        return super().get(key)


def _spans(times: array[float]) -> bytes | None:
    """A parent's children's spans, packed in order of start; ``None`` if two overlap."""
    spans = sorted(zip(times[::2], times[1::2], strict=True))
    if any(b[0] < a[1] - _OVERLAP_S for a, b in itertools.pairwise(spans)):
        return None
    return pack_floats([t for span in spans for t in span], keep_order=True)


class NodeReport:
    """One node's event files, tallied where they are (see the module)."""

    def __init__(self, roots: list[Path], ray_logs: Path | None = None) -> None:
        self.files: list[Path] = []
        self.driver_files: list[Path] = []
        for root in roots:
            if root.is_dir():
                self.files.extend(sorted(root.rglob(EVENT_GLOB)))
                self.driver_files.extend(sorted(root.rglob(DRIVER_GLOB)))
        self.ray_logs = ray_logs
        self._tally: Tally | None = None

    def prepare(self) -> dict[str, Any]:
        """Question 1: the drivers' records here, and whether submissions are recorded."""
        driver = read_driver(self.driver_files)
        for _, _, wait in driver.long_waits:  # keys travel, not 48-character ids
            wait.task_ids = [hex_key(task) for task in wait.task_ids]
        return {
            "driver": driver,
            "submissions": has_submissions(self.files),
            "files": len(self.files),
        }

    def tally(
        self, since: str | None, until: str | None, joined: bool, waits: list[list[str]]
    ) -> dict[str, Any]:
        """Question 2: the tally of every call here, as what merges (see the module).

        ``waits`` are the task keys of each of the driver's long waits (merged).
        """
        queues = _NodeQueues(joined=joined)
        waited = _ByKey({key: None for wait in waits for key in wait}) if waits else None
        tally = Tally(since, until, waited=waited, queues=queues)
        line = StartLine()
        for files in distinct_processes(self.files):
            tally.process(iter_calls(files, line, queues.line), line)
        tally.names.pack()
        self._tally = tally
        return {
            "counts": [
                tally.calls,
                tally.failed,
                tally.interrupted_count,
                tally.retried,
                tally.processes,
                tally.busy,
            ],
            "nodes": sorted(tally.nodes),
            "first": tally.first,
            "last": tally.last,
            "busiest": tally.busiest,
            "failures": list(tally.failures.values()),
            "failed_tasks": pack_keys(sorted(map(task_key, tally.failed_tasks))),
            "recovered": pack_keys(sorted(map(task_key, tally.recovered))),
            "interrupted": [
                {**row, "alive": still_running(row["pid"], row["started"])}
                for row in tally.interrupted
            ],
            "functions": {
                name: (
                    pack_floats(f.durations),
                    f.slowest,
                    f.slowest_start,
                    f.growth,
                    f.private,
                    f.retries,
                    f.task,
                )
                for name, f in tally.functions.items()
            },
            "actors": {
                actor: (
                    run.function,
                    run.calls,
                    run.busy,
                    run.gaps,
                    run.first,
                    run.last,
                    run.overlapped,
                )
                for actor, run in tally.actors.items()
            },
            "children": {parent: (len(t) // 2, _spans(t)) for parent, t in tally.children.items()},
            "leaks": tally.leaks,
            "lanes": [
                (bool(lane.leak or lane.failures.count or lane.kills.count), lane.total)
                for lane in tally.lanes
            ],
            "waits": [_wait_summary(waited, wait) for wait in waits] if waited else [],
            "queues": queues.partial(),
            "stuck_status": tally.stuck_status,
        }

    def details(
        self, call_ids: list[str], lanes: list[int], worker_ids: list[str]
    ) -> dict[str, Any]:
        """Question 3: functions of ``call_ids``, the ``lanes`` drawn, Ray's records of deaths."""
        tally = self._tally
        assert tally is not None  # noqa: S101 -- question 2 came first
        logs = find_ray_logs(self.ray_logs) if self.ray_logs is not None else None
        with_gcs = logs is not None and (logs / "gcs_server.out").is_file()
        return {
            "names": tally.names.names_of(call_ids) if call_ids else {},
            "lanes": {index: tally.lanes[index] for index in lanes},
            "logs": str(logs) if with_gcs else None,
            "deaths": worker_deaths(logs, worker_ids) if with_gcs and logs else {},
        }


def _wait_summary(waited: _ByKey, keys: list[str]) -> dict[str, Any]:
    """One long wait's calls found here: how many, the two that ended last, and the retried.

    A retried task may have ended on two nodes: its key says so (``merge.py`` counts it once).
    """
    found: list[tuple[str, int, str, Waited]] = []
    for position, key in enumerate(dict.fromkeys(keys)):
        known = waited.found(key)
        if known is not None:
            found.append((known.ended, position, key, known))
    found.sort(key=lambda item: (item[0], item[1]))
    retried = [key for _, _, key, known in found if known.call.attempt or known.call.status != "ok"]
    return {
        "count": len(found),
        "last": [(key, known) for _, _, key, known in found[-2:]],
        "retried": retried,
    }
