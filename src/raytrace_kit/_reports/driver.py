"""The driver's record read back: its run, where its code waited, and the findings from it.

``driver-*.jsonl`` files (written by ``instrument()`` and ``raytrace-kit run``) hold each
``ray.get``/``ray.wait`` the driver's code blocked in 10 ms or more, and the shorter ones
summed per line of code. Per line of code the report sums
them; a line whose gets each waited on the one call submitted just before is a
ray.get-in-a-loop; a long wait on several calls names the call that held it alone (the
straggler), from the calls' own ends, which the report's one pass over the calls collects
for the tasks these waits name (:attr:`DriverRecord.wanted`).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.finding import Finding, loop_title, most_first
from raytrace_kit._reports.lanes import seconds

__all__ = [
    "DRIVER_GLOB",
    "DriverRecord",
    "Site",
    "Wait",
    "Waited",
    "Waits",
    "driver_runs",
    "read_driver",
]

DRIVER_GLOB = "driver-*.jsonl"
LOOP_MIN_GETS = 5  # gets at one line, each on the call submitted just before: a loop
HELD_MIN_S = 1.0  # a straggler held the driver's wait alone at least this long...
HELD_SHARE = 0.1  # ...and this share of the wait
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
                {"where": f"{_short(s.file, cwds)}:{s.line}", "function": s.function,
                 "call": s.verb, "count": s.count, "blocked_s": s.blocked_s,
                 "longest_s": s.longest_s}
                for s in sites
            ],
        }  # fmt: skip

    def findings(
        self,
        waited: dict[str, Waited | None] | None,
        called: Mapping[str, Mapping[str, int]] | None = None,
    ) -> list[Finding]:
        """The ray.get-in-a-loop lines, then the stragglers the driver waited on.

        ``called``: the driver's calls by the line that submitted them, by function (from
        the submission records): a loop's line names the functions it waited on.
        """
        return [*self._loops(called or {}), *self._stragglers(waited or {})]

    def _loops(self, called: Mapping[str, Mapping[str, int]]) -> list[Finding]:
        found = []
        for site in sorted(self.sites.values(), key=lambda s: -s.serial_s):
            if site.serial < LOOP_MIN_GETS or 2 * site.serial < site.count:
                continue
            where = f"{_short(site.file, self.cwds)}:{site.line}"
            # The calls submitted at the get's own line: ray.get(f.remote(x)).
            functions = most_first(called.get(f"{site.file}:{site.line}", {}))
            found.append(Finding(
                loop_title(where, site.serial, functions),
                f"{site.serial} ray.get calls at {where} (in {site.function}) each waited on "
                "the one call submitted just before it, so those calls ran one at a time; "
                f"the driver blocked {site.serial_s:.2f} s there in all",
                "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
                "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef on "
                "instead of its value (x = f.remote(x)): Ray chains them without a round trip "
                "through the driver",
                "driver_loop", f"{site.file}:{site.line}", functions,
            ))  # fmt: skip
        return found

    def _stragglers(self, waited: dict[str, Waited | None]) -> list[Finding]:
        worst: dict[str, tuple[float, Finding]] = {}  # per line of code: the longest hold
        for _, _, wait in sorted(self.long_waits, reverse=True):
            calls = [w for t in dict.fromkeys(wait.task_ids) if (w := waited.get(t)) is not None]
            if len(calls) < 2:
                continue
            calls.sort(key=lambda w: w.ended)
            last, before = calls[-1], calls[-2]
            begun = seconds(wait.started)
            held = seconds(last.ended) - max(seconds(before.ended), begun)
            if held < HELD_MIN_S or held < HELD_SHARE * wait.blocked_s:
                continue
            if wait.where in worst and worst[wait.where][0] >= held:
                continue
            worst[wait.where] = (held, _straggler(wait, calls, held, begun, self.cwds))
        return [finding for _, finding in worst.values()]


def _straggler(
    wait: Wait, calls: list[Waited], held: float, begun: float, cwds: list[str]
) -> Finding:
    last, call = calls[-1], calls[-1].call
    others = seconds(calls[-2].ended) - begun
    task = (call.task_id or "")[:16]
    where = f"task {task or '?'}, node {(call.node_id or '?')[:12]}, pid {call.pid}"
    if last.arguments:
        where += f", arguments {last.arguments}"
    return Finding(
        f"The driver waited on a straggler: {call.function}",
        f"{wait.verb} at {_short(wait.file, cwds)}:{wait.line} (in {wait.function}) blocked "
        f"{wait.blocked_s:.2f} s on {len(calls)} calls; {len(calls) - 1} were done "
        f"{max(others, 0.0):.2f} s in, and call {call.call_id} ({where}) held it "
        f"{held:.2f} s more",
        "look at what sets that call apart: its input, its node"
        + (f" (raytrace-kit explain --task {task})" if task else "")
        + "; split skewed inputs so that no call gets far more work, or take results as they "
        "finish (ray.wait(refs, num_returns=1) in a loop) so one slow call does not hold up "
        "the rest",
        "driver_straggler", call.function,
    )  # fmt: skip


def _short(file: str, cwds: list[str]) -> str:
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
