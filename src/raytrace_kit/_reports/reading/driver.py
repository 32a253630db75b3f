"""The driver's record read back: its run, and where its code waited.

``driver-*.jsonl`` files (written by ``instrument()`` and ``raytrace-kit run``) hold each
``ray.get``/``ray.wait`` the driver's code blocked in 10 ms or more, and the shorter ones
summed per line of code. Per line of code the report sums them; what those sums say (a
ray.get in a loop, a straggler) is ``_reports/run/driver_waits.py``'s.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call

__all__ = [
    "DRIVER_GLOB",
    "DriverRecord",
    "Site",
    "Wait",
    "Waited",
    "Waits",
    "driver_runs",
    "read_driver",
    "short_file",
]

DRIVER_GLOB = "driver-*.jsonl"
LOOP_MIN_GETS = 5  # gets at one line, each on the call submitted just before: a loop
HELD_MIN_S = 1.0  # a straggler held the driver's wait alone at least this long...
HELD_SHARE = 0.1  # ...and this share of the wait,
RAN_SHARE = 0.5  # ...and ran for at least half of that hold (it did not start late)
LONG_WAITS = 20  # the longest waits on several calls, kept to find their stragglers
SITES_SHOWN = 10


class Wait(msgspec.Struct, gc=False):
    """One ``driver.get``/``driver.wait`` record."""

    event: str = ""
    started: str = ""
    blocked_s: float = 0.0
    file: str = ""
    line: int = 0
    function: str = ""
    refs: int = 0
    submitted: int = 0
    task_ids: list[str] = msgspec.field(default_factory=list)
    error_type: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def verb(self) -> str:
        return "ray.wait" if self.event == "driver.wait" else "ray.get"


_WAIT = msgspec.json.Decoder(Wait).decode


class Waits(msgspec.Struct, gc=False):
    """One ``driver.waits`` record: the short waits at one line, summed."""

    event: str = ""
    waits: str = ""  # driver.get or driver.wait
    file: str = ""
    line: int = 0
    function: str = ""
    count: int = 0
    blocked_s: float = 0.0
    longest_s: float = 0.0
    serial: int = 0
    serial_blocked_s: float = 0.0


_WAITS = msgspec.json.Decoder(Waits).decode


@dataclass
class Site:
    """One line of the driver's code that waited: how often, how long, how."""

    file: str
    line: int
    function: str
    verb: str
    count: int = 0
    blocked_s: float = 0.0
    longest_s: float = 0.0
    serial: int = 0  # gets of one ref, the one call submitted since the previous wait
    serial_s: float = 0.0


@dataclass
class Waited:
    """What the report keeps of a call a long wait named: when it ended, what it was."""

    ended: str
    call: Call
    arguments: str = ""


@dataclass
class DriverRecord:
    """The driver files of a session, read once (small: one line per wait)."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    sites: dict[tuple[str, int, str], Site] = field(default_factory=dict)
    long_waits: list[tuple[float, int, Wait]] = field(default_factory=list)  # a min-heap
    blocked_s: float = 0.0
    waits: int = 0
    held: list[bytes] = field(default_factory=list)  # store.held lines (see store_refs.py)

    @property
    def wanted(self) -> dict[str, Waited | None] | None:
        """The tasks the long waits named, to be filled with their calls' ends (or None)."""
        if not self.long_waits:
            return None
        return {task: None for _, _, wait in self.long_waits for task in wait.task_ids}

    def _site(self, file: str, line: int, function: str, event: str) -> Site:
        verb = "ray.wait" if event == "driver.wait" else "ray.get"
        site = self.sites.get((file, line, verb))
        if site is None:
            site = self.sites[file, line, verb] = Site(file, line, function, verb)
        return site

    def take_sum(self, waits: Waits) -> None:
        """A ``driver.waits`` record: the short waits at one line since the last one."""
        self.waits += waits.count
        self.blocked_s += waits.blocked_s
        site = self._site(waits.file, waits.line, waits.function, waits.waits)
        site.count += waits.count
        site.blocked_s += waits.blocked_s
        site.longest_s = max(site.longest_s, waits.longest_s)
        site.serial += waits.serial
        site.serial_s += waits.serial_blocked_s

    def take(self, wait: Wait) -> None:
        """A wait's own record (it blocked 10 ms or more, or raised)."""
        self.waits += 1
        self.blocked_s += wait.blocked_s
        site = self._site(wait.file, wait.line, wait.function, wait.event)
        site.count += 1
        site.blocked_s += wait.blocked_s
        site.longest_s = max(site.longest_s, wait.blocked_s)
        if wait.event == "driver.get" and wait.refs == 1 and wait.submitted == 1:
            site.serial += 1
            site.serial_s += wait.blocked_s
        if len(wait.task_ids) >= 2 and wait.blocked_s >= HELD_MIN_S:
            entry = (wait.blocked_s, self.waits, wait)
            if len(self.long_waits) < LONG_WAITS:
                heapq.heappush(self.long_waits, entry)
            else:
                heapq.heappushpop(self.long_waits, entry)

    @property
    def cwds(self) -> list[str]:
        """The directories the runs ran in (their code's files are named from there)."""
        return [run["cwd"] for run in self.runs if run.get("cwd")]

    def overview(self) -> dict[str, Any]:
        """The runs, and where the driver waited most (JSON-ready)."""
        sites = sorted(self.sites.values(), key=lambda s: -s.blocked_s)[:SITES_SHOWN]
        cwds = self.cwds
        return {
            "runs": self.runs,
            "waits": self.waits,
            "blocked_s": self.blocked_s,
            "sites": [
                {"where": f"{short_file(s.file, cwds)}:{s.line}", "function": s.function,
                 "call": s.verb, "count": s.count, "blocked_s": s.blocked_s,
                 "longest_s": s.longest_s}
                for s in sites
            ],
        }  # fmt: skip


def short_file(file: str, cwds: list[str]) -> str:
    """A file as the user named it: relative to the directory the program ran in."""
    for cwd in cwds:
        if cwd and file.startswith(cwd.rstrip("/\\") + os.sep):
            return file[len(cwd.rstrip("/\\")) + 1 :]
    return file


def driver_runs(files: list[Path]) -> list[tuple[dict[str, Any], list[Wait]]]:
    """Each driver file's run and all its waits, in order (for the timeline's driver lane)."""
    found = []
    for file in files:
        run: dict[str, Any] = {}
        waits: list[Wait] = []
        for raw in _lines(file):
            wait = _read_line(run, raw)
            if isinstance(wait, Wait):
                waits.append(wait)
        if run or waits:
            found.append((run, waits))
    return found


def _lines(file: Path) -> list[bytes]:
    try:
        return file.read_bytes().splitlines()
    except OSError:
        return []  # removed while we listed: nothing to read


def read_driver(files: list[Path]) -> DriverRecord:
    """Read the driver files of a session (``driver-*.jsonl``); unreadable lines are skipped."""
    record = DriverRecord()
    for file in files:
        run: dict[str, Any] = {}
        for raw in _lines(file):
            if b'"store.held"' in raw:
                record.held.append(raw)
                continue
            wait = _read_line(run, raw)
            if isinstance(wait, Wait):
                record.take(wait)
            elif wait is not None:
                record.take_sum(wait)
        if run:
            record.runs.append(run)
    return record


def _read_line(run: dict[str, Any], raw: bytes) -> Wait | Waits | None:
    """A wait's record, or a line's sum; a run's line is kept in ``run``; the rest skipped."""
    try:
        if b'"driver.waits"' in raw:
            waits = _WAITS(raw)
            return waits if waits.event == "driver.waits" else None
        if b'"driver.' in raw:
            wait = _WAIT(raw)
            return wait if wait.event in {"driver.get", "driver.wait"} else None
        if b'"run.' in raw:
            _run_line(run, msgspec.json.decode(raw))
    except (msgspec.DecodeError, AttributeError):
        pass  # a line cut short (disk full, a kill during the write), or not an object
    return None


def _run_line(run: dict[str, Any], event: dict[str, Any]) -> None:
    if event.get("event") == "run.start":
        run.update(
            script=event.get("script"), pid=event.get("pid"), started=event.get("timestamp"),
            arg_count=event.get("arg_count"), cwd=event.get("cwd"), job_id=event.get("job_id"),
        )  # fmt: skip
    elif event.get("event") == "run.end":
        run.update(
            ended=event.get("timestamp"), duration_s=event.get("duration_s"),
            exit_status=event.get("exit_status"), error_type=event.get("error_type"),
        )  # fmt: skip
