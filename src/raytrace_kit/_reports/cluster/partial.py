"""One node's share of a cluster's report, computed where its files are (``report(address=)``).

A :class:`NodeReport` reads the event files of one node's directory once, into the same
:class:`~raytrace_kit._reports.run.tally.Tally` a report of those files would fill, and
answers the caller's questions (``merge.py`` asks them, in turn):

1. :meth:`NodeReport.prepare`: its drivers' records (small) and whether it holds
   submission records, which decide what the tally must keep.
2. :meth:`NodeReport.tally`: its tally's sums, the records that merge (``sums.py``):
   counts, each function's durations packed exactly (``packing.py``: about a third of a
   byte a call), the largest figures, the failures, the first calls without an end; each
   parent's children's spans, unless they overlap here (then one flag says so); and the
   times in queue joined here.
3. to 5. :meth:`NodeReport.split`, :meth:`NodeReport.join` and :meth:`NodeReport.ends`:
   the submissions, starts and ends whose other half is elsewhere, joined by the node
   their task key falls to, and the driver's calls' ends sent back to where they were
   submitted (``joins.py``, ``parts.py``): they travel node to node, never to the caller.
6. :meth:`NodeReport.details`: what the merged tally turned out to need by name: the
   functions of some parents, the lanes the pictures draw, Ray's records of some deaths.

The node keeps its tally between the questions (the reader is an actor, ``_driver``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raytrace_kit._reports.cluster.joins import NodeQueues
from raytrace_kit._reports.cluster.parts import join
from raytrace_kit._reports.explain.deaths import find_ray_logs, worker_deaths
from raytrace_kit._reports.explain.linking import still_running
from raytrace_kit._reports.profiles.samples import SAMPLES_GLOB, read_samples
from raytrace_kit._reports.reading.calls import StartLine, distinct_processes, iter_calls
from raytrace_kit._reports.reading.driver import DRIVER_GLOB, Waited, read_driver
from raytrace_kit._reports.reading.session_list import EVENT_GLOB
from raytrace_kit._reports.run.blocked import BlockedLoops, each
from raytrace_kit._reports.run.data_ops import DataOps
from raytrace_kit._reports.run.packing import task_key
from raytrace_kit._reports.run.queues import has_submissions
from raytrace_kit._reports.run.sums import LaneTotal
from raytrace_kit._reports.run.tally import Tally

__all__ = ["NodeReport", "hex_key"]


def hex_key(task_id: str) -> str:
    """A task id as the 16 hex digits of its key: how task ids travel in waits."""
    return f"{task_key(task_id):016x}"


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


class NodeReport:
    """One node's event files, tallied where they are (see the module)."""

    def __init__(self, roots: list[Path], ray_logs: Path | None = None) -> None:
        self.files: list[Path] = []
        self.driver_files: list[Path] = []
        self.sample_files: list[Path] = []
        for root in roots:
            if root.is_dir():
                self.files.extend(sorted(root.rglob(EVENT_GLOB)))
                self.driver_files.extend(sorted(root.rglob(DRIVER_GLOB)))
                self.sample_files.extend(sorted(root.rglob(SAMPLES_GLOB)))
        self.ray_logs = ray_logs
        self._tally: Tally | None = None
        self._queues: NodeQueues | None = None

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
        queues = self._queues = NodeQueues(joined=joined, since=since, until=until)
        waited = _ByKey({key: None for wait in waits for key in wait}) if waits else None
        tally = Tally(since, until, waited=waited, queues=queues)
        line, blocked, data = StartLine(), BlockedLoops(since, until), DataOps(since, until)
        others = each(queues.line, blocked.line)
        for files in distinct_processes(self.files):
            tally.process(data.calls(iter_calls(files, line, others, data.event)), line)
        tally.names.pack()
        self._tally = tally
        sums = tally.sums()
        sums.interrupted = [  # whether each one's process lives: known here only
            {**row, "alive": still_running(row["pid"], row["started"])} for row in tally.interrupted
        ]
        return {
            "sums": sums,
            "lanes": [
                LaneTotal(bool(lane.leak or lane.failures.count or lane.kills.count), lane.total)
                for lane in tally.lanes
            ],
            "waits": [_wait_summary(waited, wait) for wait in waits] if waited else [],
            "queues": queues.here(tally.failed_tasks),
            "blocked": blocked.to_dict(),
            "data": data.to_dict(),
        }

    def split(self, offset: int, parts: int) -> list[dict[str, Any]]:
        """Question 3: the submissions and starts that did not join here, by node to join them.

        ``offset``: how many submissions the nodes before this one read.
        """
        assert self._queues is not None  # noqa: S101 -- tally() came first
        return self._queues.split(offset, parts)

    def join(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        """Question 4: this node's part of the join (``parts.join``).

        ``back`` holds, for each node, the ends of its driver's calls that joined here.
        """
        answer, back = join(parts)
        return {**answer, "back": back}

    def ends(self, back: list[tuple[bytes, bytes]], shared: list[str]) -> dict[str, Any]:
        """Question 5: the driver's lines read here, judged (``NodeQueues.ends``)."""
        assert self._queues is not None  # noqa: S101 -- tally() came first
        return self._queues.ends(back, shared)

    def details(
        self, call_ids: list[str], lanes: list[int], worker_ids: list[str], indexes: list[int]
    ) -> dict[str, Any]:
        """Question 6: functions of ``call_ids``, the ``lanes`` drawn, Ray's records of deaths.

        And the samples of the processes here (``sample=``), for the report's hot lines.

        And the task ids of the submissions read ``indexes``-th here (calls never started).
        """
        tally, queues = self._tally, self._queues
        assert tally is not None  # noqa: S101 -- question 2 came first
        assert queues is not None  # noqa: S101 -- made with the tally
        logs = find_ray_logs(self.ray_logs) if self.ray_logs is not None else None
        with_gcs = logs is not None and (logs / "gcs_server.out").is_file()
        return {
            "names": tally.names.names_of(call_ids) if call_ids else {},
            "lanes": {index: tally.lanes[index] for index in lanes},
            "task_ids": queues.task_ids(indexes) if indexes else {},
            "logs": str(logs) if with_gcs else None,
            "deaths": worker_deaths(logs, worker_ids) if with_gcs and logs else {},
            "samples": read_samples(self.sample_files),  # the sampler's, summed per stack
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
