"""What the in-flight records add to a report: time in queue, calls never started, stuck calls.

A ``call.submit`` (written by the submitting process) and the ``call.start`` of the same
task (written by the process that ran it) give the call's time in queue; a submission
with no start by the end of the records is a call that never started; a ``call.stuck``
says where a call was when it ran past its ``stuck_after``, which stays known after the
job or the worker is killed. Kept while the report streams: per submission and per first
start, one hash and one float (the join waits for the end, since either side may be read
first); the last stuck event of each call.
"""

from __future__ import annotations

import itertools
import mmap
import statistics
from array import array
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Stuck, Submission
from raytrace_kit._reports.finding import Finding

__all__ = [
    "MAX_LISTED",
    "QUEUE_FINDING_S",
    "Clock",
    "Queues",
    "behind",
    "flights",
    "has_submissions",
    "loops_of",
]

MAX_LISTED = 1000  # calls never started, stuck calls: enough to act on
QUEUE_FINDING_S = 1.0  # a function whose calls wait this long (median) in queue...
QUEUE_FINDING_RATIO = 2.0  # ...and longer than this many times they run: a finding
LOOP_MIN = 5  # calls of one line of the driver, each after the one before ended: a loop
_SUBMIT = msgspec.json.Decoder(Submission).decode
_STUCK = msgspec.json.Decoder(Stuck).decode


class _Cancel(msgspec.Struct, gc=False):
    task_id: str | None = None
    force: bool = False


_CANCEL = msgspec.json.Decoder(_Cancel).decode


class Clock:
    """ISO 8601 timestamps to seconds, the date and time parsed once per second."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, stamp: str) -> float:
        whole = stamp[:19]
        base = self.seconds.get(whole)
        if base is None:
            base = self.seconds[whole] = datetime.fromisoformat(whole + "+00:00").timestamp()
            if len(self.seconds) > 100_000:
                self.seconds.clear()
        fraction = stamp[20:26] if stamp[19:20] == "." else "0"
        return base + int(fraction) / 1e6


_HEAD = 256 * 1024  # a submitting process writes its first records early: looked at first


def has_submissions(files: list[Path]) -> bool:
    """Whether any of these event files holds a ``call.submit`` (a byte search, no decoding).

    The start of every file is searched before the rest of any: the driver's file, or a
    parent's, has one near its start, so a session with submissions is known at once.
    """
    for whole in (False, True):
        for file in files:
            try:
                with (
                    file.open("rb") as handle,
                    mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
                ):
                    if whole and len(data) <= _HEAD:
                        continue  # searched whole already
                    if data.find(_SUBMIT_MARK, 0, len(data) if whole else _HEAD) >= 0:
                        return True
            except (OSError, ValueError):  # empty (mmap refuses), or gone
                continue
    return False


_SUBMIT_MARK = b'"event":"call.submit"'


class Queues:
    """Submissions and first starts by task, and the last stuck event of each call.

    ``joined``: whether first starts are kept (only when the files hold submissions: a run
    without them costs nothing more per call).
    """

    def __init__(
        self, *, joined: bool = True, since: str | None = None, until: str | None = None
    ) -> None:
        self.joined = joined
        self.since, self.until = since, until  # the report's window, on submission times
        self.clock = Clock()
        # task -> (submitted, function, site, task id (the first few), actor, by the driver)
        self.submitted: dict[int, tuple[float, str, str | None, str | None, str | None, bool]] = {}
        self.started: dict[int, float] = {}
        self.ended: dict[int, float] = {}  # task -> its last end: a loop's calls, in order
        self.stuck: dict[str, Stuck] = {}
        self.shared: dict[str, str] = {}  # each function, site, actor's one copy
        self.killed: set[str] = set()  # tasks ray.cancel(force=True) ended: their workers
        self.ready: dict[str, list[float]] = {}  # actor -> the ends of its __init__ calls
        self.actor_last: dict[str, float] = {}  # actor -> its last call's end, as read
        self.before: dict[int, float] = {}  # method task -> its actor's last end at its start

    def line(self, raw: bytes) -> None:
        """Take one ``call.submit`` or ``call.stuck`` line (``iter_calls``' others)."""
        try:
            if b'"event":"call.submit"' in raw[:120]:
                record = _SUBMIT(raw)
                stamp = record.timestamp
                if (self.since is not None and stamp < self.since) or (
                    self.until is not None and stamp >= self.until
                ):
                    return
                if record.task_id and stamp:
                    key = hash(record.task_id)
                    if key not in self.submitted:
                        # One copy of each function, site and actor (a few hundred in a run),
                        # not one per submission: a third of a million calls hold 50 MB less.
                        shared = self.shared
                        actor = record.actor_id if record.kind == "actor_method" else None
                        self.submitted[key] = (
                            self.clock(stamp), shared.setdefault(record.function, record.function),
                            record.site and shared.setdefault(record.site, record.site),
                            record.task_id if len(self.submitted) < 4 * MAX_LISTED else None,
                            actor and shared.setdefault(actor, actor),
                            record.parent_call_id is None,
                        )  # fmt: skip
            elif b'"event":"call.stuck"' in raw[:120]:
                event = _STUCK(raw)
                if event.call_id in self.stuck or len(self.stuck) < MAX_LISTED:
                    self.stuck[event.call_id] = event
            elif b'"event":"call.cancel"' in raw[:120]:
                cancel = _CANCEL(raw)
                if cancel.force and cancel.task_id and len(self.killed) < MAX_LISTED:
                    self.killed.add(cancel.task_id)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # a line cut short by a killed process

    def start(self, task_id: str, begun: str, ended: str | None, attempt: int | None) -> None:
        """A call's first attempt's start (the queue ends there), and its task's last end."""
        key = hash(task_id)
        if not attempt and begun and key not in self.started:
            self.started[key] = self.clock(begun)
        if ended:
            when = self.clock(ended)
            if when > self.ended.get(key, 0.0):
                self.ended[key] = when

    def actor_call(
        self, actor_id: str, task_id: str, kind: str | None, attempt: int | None, ended: str | None
    ) -> None:
        """A call of an actor, in the order its process ran them (see :func:`behind`)."""
        last = self.actor_last
        if kind == "actor_method" and not attempt and actor_id in last:
            self.before.setdefault(self._key(task_id), last[actor_id])
        if ended:
            when = last[actor_id] = self._time(ended)
            if kind == "actor_init":
                self.ready.setdefault(actor_id, []).append(when)

    def _key(self, task_id: str) -> int:
        """A task's key in these tables (:class:`joins.NodeQueues`: alike in every process)."""
        return hash(task_id)

    def _time(self, stamp: str) -> float:
        """A stamp in these tables' unit: seconds (:class:`joins.NodeQueues`: microseconds)."""
        return self.clock(stamp)

    def results(self, ended: Callable[[str], str | None]) -> dict[str, Any]:
        """Time in queue per function, calls never started, stuck calls (for the report).

        ``ended`` gives a call's status by its id (``None`` if it never ended).
        """
        waits: dict[str, array[float]] = {}
        never: list[dict[str, Any]] = []
        never_count = 0
        sites: dict[str, list[tuple[float, float | None]]] = {}  # the driver's, by line
        actors: dict[str, list[float]] = {}  # an actor's calls: each one's time in queue
        started, ends = self.started.get, self.ended.get
        for key, (when, function, site, task_id, actor, by_driver) in self.submitted.items():
            begun = started(key)
            if by_driver and site:
                at_site = sites.get(site)  # not setdefault(site, []): a new list per call
                if at_site is None:
                    at_site = sites[site] = []
                at_site.append((when, ends(key)))
            if begun is None:
                never_count += 1
                if len(never) < MAX_LISTED:
                    never.append({"function": function, "submitted": when, "site": site,
                                  "task_id": task_id})  # fmt: skip
                continue
            queued = waits.get(function)
            if queued is None:
                queued = waits[function] = array("d")
            queued.append(begun - when if begun > when else 0.0)
            if actor:
                behind_others = behind(when, begun, self.before.get(key), self.ready.get(actor))
                actors.setdefault(actor, []).append(behind_others)
        waited = {actor: (len(values), max(values)) for actor, values in actors.items()}
        return flights(
            waits, never, never_count, self.stuck.values(), ended, loops_of(sites), waited
        )

    def findings(
        self, found: dict[str, Any], durations: dict[str, float], said: set[str]
    ) -> list[Finding]:
        """The driver's ray.get loops, calls that queued longer than they ran, stuck calls.

        ``said``: the subjects of findings made already (the driver's record names its
        loops by line too: each is said once).
        """
        made = [
            Finding(
                f"ray.get in a loop in the driver: {loop['site']}",
                f"{loop['serial']} of the {loop['calls']} calls submitted at {loop['site']} "
                "were each submitted after the one before had ended: the driver waited on "
                "each before submitting the next, so they ran one at a time",
                "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
                "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef "
                "on instead of its value (x = f.remote(x))",
                "driver_loop",
                loop["site"],
            )
            for loop in found["loops"]
            if loop["site"] not in said
        ]
        for row in found["queued"]:
            ran = durations.get(row["function"])
            wait = row["p50_s"]
            if ran is None or wait < QUEUE_FINDING_S or wait < QUEUE_FINDING_RATIO * ran:
                continue
            made.append(Finding(
                f"Calls waited in queue longer than they ran: {row['function']}",
                f"{row['count']} calls waited {wait:.2f} s between .remote() and their start "
                f"(median; up to {row['max_s']:.2f} s) and ran {ran:.2f} s (median): more "
                "was submitted at once than there were CPUs (or actor slots) to run it",
                "ask for fewer resources per call or add nodes if the queue is the CPUs; "
                "for one actor running its calls one at a time, spread them over several "
                "actors (ray.util.ActorPool) or let them overlap (async methods, "
                "max_concurrency); raytrace-kit stuck shows a queue while it is there",
                "queued", row["function"],
            ))  # fmt: skip
        if found["stuck"]:
            first = found["stuck"][0]
            where = f" at {first['where']}" if first["where"] else ""
            made.append(Finding(
                f"Calls ran past their stuck_after: {first['function']}"
                + (f" and {len(found['stuck']) - 1} more" if len(found["stuck"]) > 1 else ""),
                f"{len(found['stuck'])} call(s) reported themselves stuck; the first, "
                f"{first['function']} (call {first['call_id']}), was{where} after "
                f"{first['running_s']:.1f} s ({first['outcome']})"
                + (f", waiting in {first['waiting_in']}" if first["waiting_in"] else ""),
                "read each one's stack below (the line it was blocked on); while a job "
                "hangs, raytrace-kit stuck names what each call waits on and any deadlock",
                "stuck_calls", first["function"],
            ))  # fmt: skip
        return made


def behind(
    submitted: float, begun: float, before: float | None, ready: list[float] | None
) -> float:
    """How long an actor's method call waited behind the actor's other calls.

    From when it could have run (submitted, and the actor created: the last end of its
    ``__init__`` before the call) until the call before it in the actor ended (``before``,
    the actor's last end when this call started). A call submitted before its actor was
    created waited for the creation first (a worker process to start, ``__init__`` to run);
    a call submitted after the one before had ended waited for Ray to deliver it: neither
    is waiting behind other calls. In seconds, or whole microseconds, as its arguments are.
    """
    if before is None:
        return 0.0
    created = max((end for end in ready or () if end <= begun), default=0.0)
    return max(min(begun, before) - max(submitted, created), 0.0)


def flights(  # noqa: PLR0917 -- one argument per part of the joined records
    waits: dict[str, array[float]],
    never: list[dict[str, Any]],
    never_count: int,
    stuck: Iterable[Stuck],
    ended: Callable[[str], str | None],
    loops: list[dict[str, Any]],
    actors: dict[str, tuple[int, float]],
) -> dict[str, Any]:
    """The report's in-flight sections from the joined records (see :meth:`Queues.results`).

    ``waits``: each function's times in queue; ``never``: the first calls never started,
    in the order their submissions were read; ``loops``: the driver's lines that are
    ray.get loops (:func:`loops_of`); ``actors``: each actor's calls' count and longest
    time in queue.
    """
    queued: list[dict[str, Any]] = []
    for function, values in waits.items():
        ordered = sorted(values)
        queued.append({
            "function": function, "count": len(ordered),
            "p50_s": statistics.median(ordered),
            "p95_s": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "max_s": ordered[-1],
        })  # fmt: skip
    queued.sort(key=lambda row: -row["p50_s"])
    never.sort(key=lambda row: row["submitted"])
    rows = [_stuck_row(event, ended(event.call_id)) for event in stuck]
    rows.sort(key=lambda row: row["timestamp"])
    longest = {actor: most for actor, (count, most) in actors.items() if count >= LOOP_MIN}
    return {"queued": queued, "never_started": never, "never_started_count": never_count,
            "stuck": rows, "loops": loops, "actor_queues": longest}  # fmt: skip


def loops_of(sites: dict[str, list[tuple[float, float | None]]]) -> list[dict[str, Any]]:
    """Lines of the driver whose calls were each submitted after the one before ended.

    What ``for x in xs: ray.get(f.remote(x))`` leaves: its calls ran one at a time, each
    waited on by the driver before it submitted the next.
    """
    found: list[dict[str, Any]] = []
    for site, calls in sites.items():
        if len(calls) < LOOP_MIN:
            continue
        calls.sort()
        serial = sum(
            1
            for (_, ended), (next_submitted, _) in itertools.pairwise(calls)
            if ended is not None and ended <= next_submitted
        )
        if serial >= LOOP_MIN - 1 and 2 * serial >= len(calls):
            found.append({"site": site, "calls": len(calls), "serial": serial})
    found.sort(key=lambda row: -row["serial"])
    return found


def _stuck_row(event: Stuck, status: str | None) -> dict[str, Any]:
    stack = event.stack
    where = f"{stack[-1][0]}:{stack[-1][1]}" if stack and len(stack[-1]) > 1 else None
    waiting = event.waiting_on or {}
    outcome = {None: "never ended: killed, or still running", "interrupted": "its process died"}
    return {
        "function": event.function, "call_id": event.call_id, "task_id": event.task_id,
        "node_id": event.node_id, "pid": event.pid, "timestamp": event.timestamp,
        "running_s": event.running_s, "reports": event.report, "where": where,
        "stack": stack, "waiting_in": waiting.get("what"),
        "waiting_on": waiting.get("task_ids") or [],
        "outcome": outcome.get(status, f"it ended later ({status})"),
    }  # fmt: skip
