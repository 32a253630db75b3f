"""A cluster's report from its nodes' shares: the questions asked in turn, the answers merged.

Each node answers with what merges (``partial.py``); merged here in the order a report
of the collected files reads them (by node, then by file), the tally is the one that
report would have filled: the same counts, the same durations bit for bit, the same
first and largest, the same ties broken the same way. It is then finished by the very
code that finishes a report of files (``report.finish``). Only sums of floats may differ
in their last bit where one actor's or one driver line's records are on two nodes.

The questions go through ``ask(method, arguments per node)``, which returns each node's
answer in order: Ray actors on a cluster (``_driver/cluster_report.py``), or
:class:`~raytrace_kit._reports.cluster.partial.NodeReport` objects in this process (the tests).
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raytrace_kit._output.schema import Call, Stuck
from raytrace_kit._reports.cluster.joins import KEEP_TASK_IDS
from raytrace_kit._reports.cluster.times import unpack_lines
from raytrace_kit._reports.explain.deaths import WorkerDeath
from raytrace_kit._reports.profiles.samples import SampleRow
from raytrace_kit._reports.reading.driver import LONG_WAITS, DriverRecord, Site, Waited
from raytrace_kit._reports.run.blocked import BlockedLoops
from raytrace_kit._reports.run.data_ops import DataOps
from raytrace_kit._reports.run.flights import flights, loops_of
from raytrace_kit._reports.run.interrupted import RayLogs
from raytrace_kit._reports.run.lanes import LANES_DRAWN, Lane
from raytrace_kit._reports.run.names import CallNames
from raytrace_kit._reports.run.packing import unpack_floats
from raytrace_kit._reports.run.queues import MAX_LISTED, Queues
from raytrace_kit._reports.run.rules import SERIAL_MIN_CHILDREN
from raytrace_kit._reports.run.sections import Report, add_samples, finish
from raytrace_kit._reports.run.tally import Tally

__all__ = ["Ask", "Merged", "cluster_report", "merged"]

# ask(method, [arguments of node 0, of node 1, ...]) -> [answer of node 0, ...]
Ask = Callable[[str, list[tuple[Any, ...]]], list[Any]]


@dataclass
class Merged:
    """The nodes' answers merged: the tally of every call, and what finishes it into a report."""

    tally: Tally
    driver: DriverRecord
    queues: Queues
    flights: dict[str, Any]
    ray_logs: RayLogs
    files: int
    blocked: BlockedLoops
    data: DataOps
    samples: list[SampleRow]

    def report(self, source: str) -> Report:
        """The report, finished by the code that finishes a report of files."""
        made = finish(
            self.tally, self.driver, self.queues, self.flights, self.ray_logs, source=source,
            files=self.files, blocked=self.blocked, data=self.data,
        )  # fmt: skip
        add_samples(made, self.tally, self.samples)
        return made


def cluster_report(
    ask: Ask, nodes: int, *, since: str | None, until: str | None, source: str
) -> Report:
    """The report of ``nodes`` nodes' files, computed by them and merged here (see module)."""
    return merged(ask, nodes, since=since, until=until).report(source)


def merged(ask: Ask, nodes: int, *, since: str | None, until: str | None) -> Merged:
    """The questions asked of ``nodes`` nodes in turn, and their answers merged."""
    prepared = ask("prepare", [()] * nodes)
    driver = _drivers([answer["driver"] for answer in prepared])
    joined = any(answer["submissions"] for answer in prepared)
    waits = [list(wait.task_ids) for _, _, wait in driver.long_waits]
    partials = ask("tally", [(since, until, joined, waits)] * nodes)
    queued = [part["queues"] for part in partials]
    offsets = [sum(q["count"] for q in queued[:rank]) for rank in range(nodes)]
    pieces = ask("split", [(offsets[rank], nodes) for rank in range(nodes)])
    joins = ask("join", [([pieces[i][j] for i in range(nodes)],) for j in range(nodes)])
    first, shared = _sites(queued, offsets)
    lined = ask(
        "ends", [([joins[j]["back"][i] for j in range(nodes)], shared) for i in range(nodes)]
    )
    tally = _merged_tally(partials, since, until, waits)
    chosen = _chosen_lanes(partials)
    workers = [row["worker_id"] for row in tally.interrupted if row["worker_id"]]
    found, kept = _flights(queued, joins)
    details = ask(
        "details",
        [(_candidates(tally), chosen.get(rank, []), workers, kept.get(rank, []))
         for rank in range(nodes)],
    )  # fmt: skip
    tally.names = _Known({k: v for answer in details for k, v in answer["names"].items()})
    tally.lanes = _lanes(partials, details)
    ray_logs = _ray_logs(tally, details)
    for row in found["never"]:
        row["task_id"] = details[row.pop("rank")]["task_ids"].get(row.pop("index"))
    flown = flights(
        found["waits"], found["never"], found["count"], found["stuck"], tally.stuck_status.get,
        _loops(lined, first, shared), found["actors"], called=found["called"],
        made=found["made"], backlog=found["backlog"],
    )  # fmt: skip
    queues = Queues(joined=joined)
    queues.killed = {task for part in queued for task in part["killed"]}
    queues.by_value.add(part["by_value"] for part in queued)  # large data passed by value
    return Merged(
        tally, driver, queues, flown, ray_logs, sum(answer["files"] for answer in prepared),
        BlockedLoops.merged(part["blocked"] for part in partials),
        DataOps.merged(part["data"] for part in partials),
        [row for answer in details for row in answer["samples"]],
    )  # fmt: skip


def _merged_tally(
    partials: list[dict[str, Any]], since: str | None, until: str | None, waits: list[list[str]]
) -> Tally:
    """The nodes' sums merged, each node's whole, in order: as a report reads them."""
    tally = Tally(since, until)
    for part in partials:
        tally.merge(part["sums"])
    tally.waited = _waited(waits, partials) if waits else None
    return tally


def _candidates(tally: Tally) -> list[str]:
    """The parents the one-at-a-time rule may name: their functions are asked of the nodes."""
    return [
        parent
        for parent, children in tally.children.items()
        if children.count >= SERIAL_MIN_CHILDREN and not children.overlapped
    ]


def _ray_logs(tally: Tally, details: list[dict[str, Any]]) -> RayLogs:
    """Ray's records of deaths, and whether each call without an end lives, as nodes said."""
    alive = {row["call_id"]: row.pop("alive") for row in tally.interrupted}
    deaths: dict[str, WorkerDeath] = {}
    for answer in details:
        deaths.update(answer["deaths"])
    logs = next((answer["logs"] for answer in details if answer["logs"]), None)
    return RayLogs(
        Path(logs) if logs else None,
        lambda ids: {w: deaths[w] for w in ids if w in deaths},
        lambda row: alive.get(row["call_id"], False),
    )


def _sites(queued: list[dict[str, Any]], offsets: list[int]) -> tuple[dict[str, int], list[str]]:
    """Each line of the driver's code: its first submission (in order); lines of two nodes."""
    first: dict[str, int] = {}
    nodes: Counter[str] = Counter()
    for offset, part in zip(offsets, queued, strict=True):
        for site, earliest in part["sites"].items():
            first[site] = min(first.get(site, offset + earliest), offset + earliest)
            nodes[site] += 1
    return first, sorted(site for site, count in nodes.items() if count > 1)


def _loops(
    lined: list[dict[str, Any]], first: dict[str, int], shared: list[str]
) -> list[dict[str, Any]]:
    """The driver's ray.get loops by line, as ``flights.loops_of`` finds them in one place.

    Each node judged the lines submitted from it alone; a line submitted from several
    nodes is judged here, from all its calls.
    """
    found = [loop for answer in lined for loop in answer["loops"]]
    if shared:
        calls = {
            site: [call for answer in lined if site in answer["shared"]
                   for call in unpack_lines(answer["shared"][site])]
            for site in shared
        }  # fmt: skip
        found.extend(loops_of(calls))
    found.sort(key=lambda loop: first[loop["site"]])  # as a report meets them...
    found.sort(key=lambda loop: -loop["serial"])  # ...then by steps, as loops_of sorts
    return found


class _Known(CallNames):
    """The functions of the calls a merged report names, as the nodes answered."""

    def __init__(self, found: dict[str, str]) -> None:
        super().__init__()
        self.found = found

    def names_of(self, call_ids: Iterable[str]) -> dict[str, str]:
        return {c: self.found[c] for c in call_ids if c in self.found}


def _drivers(records: list[DriverRecord]) -> DriverRecord:
    """The drivers' records of every node as one, read in the same order."""
    merged = DriverRecord()
    for record in records:
        offset = merged.waits  # a wait's order among all: the tie-break of the longest
        merged.runs.extend(record.runs)
        for key, site in record.sites.items():
            known = merged.sites.get(key)
            if known is None:
                known = merged.sites[key] = Site(site.file, site.line, site.function, site.verb)
            known.count += site.count
            known.blocked_s += site.blocked_s
            known.longest_s = max(known.longest_s, site.longest_s)
            known.serial += site.serial
            known.serial_s += site.serial_s
        for blocked, order, wait in record.long_waits:
            entry = (blocked, order + offset, wait)
            if len(merged.long_waits) < LONG_WAITS:
                heapq.heappush(merged.long_waits, entry)
            else:
                heapq.heappushpop(merged.long_waits, entry)
        merged.blocked_s += record.blocked_s
        merged.waits += record.waits
    return merged


def _waited(waits: list[list[str]], partials: list[dict[str, Any]]) -> dict[str, Waited | None]:
    """What the driver's straggler rule reads of each long wait's calls, merged.

    Per wait, a node sent how many of its calls ended there and the two that ended last;
    the rule reads the count and those two. The others are stood in for by entries that
    sort first (they end at ""), so the rule counts them and passes over them.
    """
    waited: dict[str, Waited | None] = {}
    stand_ins: list[tuple[list[str], int]] = []
    for index, wait in enumerate(waits):
        keys = list(dict.fromkeys(wait))
        position = {key: i for i, key in enumerate(keys)}
        best: dict[str, Waited] = {}
        seen: Counter[str] = Counter()
        count = 0
        for part in partials:
            summary = part["waits"][index]
            count += summary["count"]
            seen.update(summary["retried"])
            for key, known in summary["last"]:
                if key not in best or known.ended > best[key].ended:
                    best[key] = known
        count -= sum(n - 1 for n in seen.values() if n > 1)  # a task found on two nodes
        last = sorted(best.items(), key=lambda item: (item[1].ended, position[item[0]]))[-2:]
        for key, known in last:
            waited[key] = known
        stand_ins.append((keys, count - len(last)))
    for keys, missing in stand_ins:
        left = missing
        for key in keys:
            if left <= 0:
                break
            if waited.get(key) is None:
                waited[key] = Waited("", Call())
                left -= 1
    return waited


def _chosen_lanes(partials: list[dict[str, Any]]) -> dict[int, list[int]]:
    """The lanes the pictures draw (``lanes.lanes_data``'s choice), by node: their indexes."""
    everyone = [
        (not weight.marked, -weight.total, rank, index)
        for rank, part in enumerate(partials)
        for index, weight in enumerate(part["lanes"])
    ]
    chosen: dict[int, list[int]] = {}
    for _, _, rank, index in sorted(everyone)[:LANES_DRAWN]:
        chosen.setdefault(rank, []).append(index)
    return chosen


def _lanes(partials: list[dict[str, Any]], details: list[dict[str, Any]]) -> list[Lane]:
    """Every lane in its place: the drawn ones as the nodes sent them, the rest stand-ins."""
    lanes: list[Lane] = []
    for rank, part in enumerate(partials):
        sent = details[rank]["lanes"]
        for index, weight in enumerate(part["lanes"]):
            if index in sent:
                lanes.append(sent[index])
            else:  # not drawn: only its place in the order, and its count, matter
                stand_in = Lane()
                stand_in.total = weight.total
                lanes.append(stand_in)
    return lanes


def _flights(
    parts: list[dict[str, Any]], joins: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[int, list[int]]]:
    """Time in queue, calls never started, stuck calls: joined on the nodes, merged here.

    And the submissions whose task ids a report lists (by node, their index there).
    """
    waits: dict[str, array[float]] = {}
    backlog: dict[str, array[float]] = {}  # of calls submitted once their process was up
    first: dict[str, int] = {}
    actors: dict[str, tuple[int, float]] = {}
    stuck: dict[str, Stuck] = {}
    never: list[dict[str, Any]] = []
    called: dict[str, Counter[str]] = {}  # the driver's lines: their calls by function
    made: dict[str, dict[str, Any]] = {}  # each actor, as its creation's record says

    def take(answer: dict[str, Any], offset: int) -> None:
        for function, packed in answer["waits"].items():
            waits.setdefault(function, array("d")).extend(unpack_floats(packed))
            at = offset + answer["first"][function]
            first[function] = min(first.get(function, at), at)
        for function, packed in answer["backlog"].items():
            backlog.setdefault(function, array("d")).extend(unpack_floats(packed))
        for actor, (count, longest) in answer["actors"].items():
            known = actors.get(actor, (0, 0.0))
            actors[actor] = (known[0] + count, max(known[1], longest))

    offset = 0
    for part in parts:  # what each node joined itself
        take(part, offset)
        for site, functions in part["called"].items():  # each submission is read on one node
            called.setdefault(site, Counter()).update(functions)
        made.update(part["made"])
        for event in part["stuck"]:
            if event.call_id in stuck or len(stuck) < MAX_LISTED:
                stuck[event.call_id] = event
        offset += part["count"]
    for answer in joins:  # what the nodes joined of each other's halves (orders are global)
        take(answer, 0)
        never.extend(answer["never"])
    never.sort(key=lambda row: row["order"])  # the first in the order a report reads them
    never = never[:MAX_LISTED]
    kept: dict[int, list[int]] = {}
    for row in never:
        if row.pop("order") < KEEP_TASK_IDS:
            kept.setdefault(row["rank"], []).append(row["index"])
    return {
        "waits": {name: waits[name] for name in sorted(waits, key=lambda n: first[n])},
        "never": never,
        "count": sum(answer["never_count"] for answer in joins),
        "stuck": stuck.values(),
        "actors": actors,
        "called": called,
        "made": made,
        "backlog": backlog,
    }, kept
