"""A synthetic session shaped like a real pipeline's, for ``benchmarks/report.py``.

16 worker processes on 2 nodes (8 each; one per node hosts an actor), 50 functions. About
one call in 40 is a parent that submits 2 to 6 task children and waits for them: one after
another (the ray.get-in-a-loop pattern) for half of the parents, all at once for the rest.
Its children run in other processes, as Ray runs them, and it ends after them. 2% of calls
fail with a real traceback (chained, about 1.5 KB); a few hundred of those are retried
(attempt 1) and succeed; a handful never end; a few calls straggle.

Every call has its ``call.submit`` record, as the kit writes them: the driver's (a process
of its own, with its file) for top-level calls, the parent's for its children, each with
the line of code that submitted it; so a million events are about 333,000 calls.

Calls are scheduled on a simulated clock (each process runs one call at a time, the next
call goes to the process free first) and written through the kit's own renderer and
writer, stamped with the clock's times, so durations, overlaps and the order of each
process's file are those of a run. The report reads processes one at a time, in the
order of their files' names: about half of the parents are read before their children.
"""

from __future__ import annotations

import heapq
import random
import time
from datetime import datetime, timezone
from pathlib import Path

from raytrace_kit._output import encode, submissions
from raytrace_kit._output.writer import EventWriter
from raytrace_kit._process import ProcessIdentity

MIB = 2**20
NODES, PER_NODE = 2, 8
PARENT_SHARE = 0.0266  # of the units of work: ~12,000 parents in 500,000 calls
FAIL_SHARE = 0.02
RETRY_SHARE = 1 / 15  # of the failures: a few hundred retried calls
INTERRUPTED = 6
STRAGGLE_EVERY = 25_000
JOB = "01000000"

PARENTS = [f"etl.driver.fan_out_{w}" for w in ("shard", "partition", "batch", "region")]
STEPS = [f"etl.steps.step{i:02d}" for i in range(40)]
METHODS = [
    "etl.store.Store.put", "etl.store.Store.get", "etl.store.Store.flush",
    "etl.cache.Cache.get", "etl.cache.Cache.put", "etl.cache.Cache.evict",
]  # fmt: skip


def _parse(rows: list[str]) -> list[int]:
    return [_field(row) for row in rows]


def _field(row: str) -> int:
    try:
        return int(row.split(",")[3])
    except (IndexError, ValueError) as exc:
        msg = f"row {row!r} has no numeric 4th field (schema v3 expects id,name,kind,count)"
        raise KeyError(msg) from exc


def _validate(shard: dict[str, list[str]]) -> list[int]:
    return _parse(shard["rows"])


def _load(shard_id: int) -> list[int]:
    shard = {"rows": [f"{shard_id},name,kind,{shard_id}", f"{shard_id},broken"]}
    try:
        return _validate(shard)
    except KeyError as exc:
        msg = f"shard {shard_id}: could not load (source s3://bucket/data/part-{shard_id:05d})"
        raise ValueError(msg) from exc


def _errors() -> list[BaseException]:
    """Exceptions with real tracebacks (a chained one), raised through a few frames."""
    made: list[BaseException] = []
    for shard in range(4):
        try:
            _load(shard)
        except ValueError as exc:
            made.append(exc)
    try:
        {}["missing key for partition 7"]
    except KeyError as exc:
        made.append(exc)
    return made


class _Clock:
    """ISO 8601 stamps of simulated times, the date-time part formatted once a second."""

    def __init__(self) -> None:
        self.second, self.text = -1, ""

    def stamp(self, at: float) -> bytes:
        second = int(at)
        if second != self.second:
            self.second = second
            moment = datetime.fromtimestamp(second, timezone.utc)
            self.text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self.text}.{int((at - second) * 1e6):06d}+00:00".encode()


class _Process:
    """One worker process: its file, ids, call counter, clock and memory."""

    def __init__(self, index: int, node: str, rng: random.Random, directory: Path) -> None:
        pid = 3000 + index
        self.index = index
        self.identity = ProcessIdentity(JOB, node, rng.randbytes(28).hex(), pid, is_worker=True)
        self.writer = EventWriter(directory / f"events-{node[:12]}-{pid}.jsonl")
        self.prefix = rng.randbytes(5).hex()
        self.counter = 0
        self.free_at = 0.0
        self.rss = rng.randrange(300, 600) * MIB

    def call_id(self) -> str:
        self.counter += 1
        return f"{self.prefix}{self.counter & 0xFFFFFF:06x}"


class _Run:
    """The simulated run: schedules calls on processes and writes them."""

    def __init__(
        self, directory: Path, calls: int, seed: int = 26, *, submits: bool = True
    ) -> None:
        self.submits = submits
        self.rng = rng = random.Random(seed)  # noqa: S311 -- a reproducible run, no secret
        self.calls = calls
        self.written = 0
        self.events = 0
        self.clock = _Clock()
        self.origin = float(int(time.time() - 3 * 86400))  # long gone: no pid is its process
        nodes = [rng.randbytes(28).hex() for _ in range(NODES)]
        self.processes = [
            _Process(i, nodes[i // PER_NODE], rng, directory) for i in range(NODES * PER_NODE)
        ]
        self.driver = _Process(-1, nodes[0], rng, directory)  # pid 2999: the driver
        self.driver.identity = ProcessIdentity(
            JOB, nodes[0], rng.randbytes(28).hex(), 2999, is_worker=False
        )
        hosts = [self.processes[PER_NODE * n + PER_NODE - 1] for n in range(NODES)]
        self.actors = {
            "etl.store.Store": (hosts[0], rng.randbytes(16).hex()),
            "etl.cache.Cache": (hosts[1], rng.randbytes(16).hex()),
        }
        hosted = {host.index for host in hosts}
        for process in self.processes:
            process.free_at = self.origin
        self.free = [(self.origin, p.index) for p in self.processes if p.index not in hosted]
        heapq.heapify(self.free)
        names = [*PARENTS, *STEPS, *METHODS]
        self.fragments = {
            name: encode.members(
                {"function": name, "kind": "actor_method" if name in METHODS else "task"}
            )
            for name in names
        }
        # Medians per function: the last ten steps are tiny (a finding), parents take long.
        self.median = {name: rng.uniform(0.02, 0.4) for name in names}
        self.median.update({name: rng.uniform(0.002, 0.008) for name in STEPS[30:]})
        self.submit_prefixes = {
            name: submissions.submit_prefix(
                name, "actor_method" if name in METHODS else "task",
                {"CPU": 0.0 if name in METHODS else 1.0}, None,
            )
            for name in names
        }  # fmt: skip
        self.sites = {name: f"/home/user/etl/driver.py:{40 + i}" for i, name in enumerate(names)}
        self.errors = _errors()
        interrupted_every = max(calls // (INTERRUPTED + 1), 1)
        self.interrupted = {interrupted_every * (i + 1) for i in range(INTERRUPTED)}

    # --- scheduling ---

    def _task_process(self, after: float, not_in: int = -1) -> _Process:
        """The task process free first (not ``not_in``), taken off the heap."""
        free_at, index = heapq.heappop(self.free)
        if index == not_in:
            other = heapq.heappop(self.free)
            heapq.heappush(self.free, (free_at, index))
            free_at, index = other
        process = self.processes[index]
        process.free_at = max(free_at, after)
        return process

    def _done(self, process: _Process) -> None:
        heapq.heappush(self.free, (process.free_at, process.index))

    def _duration(self, function: str) -> float:
        took = self.rng.lognormvariate(0.0, 0.5) * self.median[function]
        if self.written % STRAGGLE_EVERY == STRAGGLE_EVERY // 2:
            took = took * 30 + 2.0
        return took

    # --- writing ---

    def _submit(
        self, by: _Process, function: str, at: float, task_id: str, parent: str | None
    ) -> None:
        """The ``call.submit`` record of a call, in the file of the process that submitted it."""
        if not self.submits:
            return
        owner = function.rsplit(".", 1)[0]
        actor = self.actors[owner][1] if owner in self.actors else None
        site = (
            self.sites[function]
            if parent is None
            else f"/home/user/etl/steps.py:{77 + len(function) % 9}"
        )
        line = submissions.submit_line(
            at, self.submit_prefixes[function], task_id, actor, parent, by.identity, site, None
        )
        by.writer.write(line)
        self.events += 1

    def _start(  # noqa: PLR0917 -- one call's parts
        self,
        process: _Process,
        function: str,
        at: float,
        parent: str | None,
        task_id: str,
        attempt: int,
    ) -> tuple[str, str]:
        call_id = process.call_id()
        owner = function.rsplit(".", 1)[0]
        actor = self.actors[owner][1] if owner in self.actors else None
        members = encode.call_members(
            call_id=call_id,
            spec_fragment=self.fragments[function],
            mode="ray",
            task_id=task_id,
            actor_id=actor,
            identity=process.identity,
            attempt=attempt,
            task_name=function.rsplit(".", 1)[-1],
            parent=parent,
        )
        rss = process.rss
        line = encode.call_line("call.start", "info", members, encode.memory_members((rss,) * 3))
        process.writer.write(line[:14] + self.clock.stamp(at) + line[46:])
        self.written += 1
        self.events += 1
        return call_id, members

    def _end(  # noqa: PLR0917 -- one call's parts
        self,
        process: _Process,
        members: str,
        begun: float,
        ended: float,
        rss_start: int,
        error: BaseException | None,
    ) -> None:
        took = ended - begun
        figures = (process.rss, process.rss // 2, process.rss)
        tail = encode.end_members(
            took, error, took * 0.8, rss_start=rss_start, figures=figures, process_cpu_s=took * 0.9
        )
        line = encode.call_line("call.end", "error" if error else "info", members, tail)
        process.writer.write(line[:14] + self.clock.stamp(ended) + line[46:])
        self.events += 1

    def call(
        self,
        process: _Process,
        function: str,
        at: float,
        *,
        parent: str | None = None,
        took: float | None = None,
        attempt: int = 0,
        task_id: str | None = None,
        by: _Process | None = None,
    ) -> tuple[str, str, float, BaseException | None]:
        """Run one call on ``process`` from ``at``: its call id, task id, end and error.

        A first attempt is submitted just before (``by``: the parent's process, else the
        driver); a retry keeps its task id and its submission.
        """
        rng = self.rng
        if task_id is None:
            task_id = rng.randbytes(8).hex() + "ff" * 12 + JOB
            self._submit(
                by or self.driver, function, at - rng.uniform(0.0002, 0.002), task_id, parent
            )
        call_id, members = self._start(process, function, at, parent, task_id, attempt)
        took = self._duration(function) if took is None else took
        ended = at + took
        process.free_at = ended
        rss_start = process.rss
        if rng.random() < 0.1:  # most calls leave their process's memory as it was
            process.rss = max(process.rss + rng.randrange(-8, 9) * MIB, 200 * MIB)
        if self.written in self.interrupted:
            return call_id, task_id, ended, None  # its process died during it: no call.end
        error = None
        if attempt == 0 and rng.random() < FAIL_SHARE:
            error = self.errors[rng.randrange(len(self.errors))]
        self._end(process, members, at, ended, rss_start, error)
        return call_id, task_id, ended, error

    def plain(self) -> None:
        rng = self.rng
        if rng.random() < 0.1:
            function = METHODS[rng.randrange(len(METHODS))]
            process, _ = self.actors[function.rsplit(".", 1)[0]]
            at = max(process.free_at, self.free[0][0]) + 0.0005
            self.call(process, function, at)
            return
        function = STEPS[rng.randrange(len(STEPS))]
        process = self._task_process(self.origin)
        _, task_id, ended, error = self.call(process, function, process.free_at + 0.001)
        self._done(process)
        if error is not None and function not in STEPS[30:] and rng.random() < RETRY_SHARE:
            again = self._task_process(ended + 0.05, not_in=process.index)
            self.call(again, function, again.free_at, attempt=1, task_id=task_id)
            self._done(again)

    def family(self) -> None:
        """A parent and its task children, in other processes; it ends after them."""
        rng = self.rng
        parent = self._task_process(self.origin)
        function = PARENTS[rng.randrange(len(PARENTS))]
        begun = parent.free_at + 0.001
        task_id = rng.randbytes(8).hex() + "ff" * 12 + JOB
        self._submit(self.driver, function, begun - rng.uniform(0.0002, 0.002), task_id, None)
        call_id, members = self._start(parent, function, begun, None, task_id, 0)
        token = f"{call_id}/{task_id}"
        one_by_one = rng.random() < 0.5
        at, last = begun + 0.002, begun
        for _ in range(rng.randrange(2, 7)):
            child = self._task_process(at, not_in=parent.index)
            _, _, ended, _ = self.call(
                child, STEPS[rng.randrange(10)], child.free_at, parent=token, by=parent
            )
            self._done(child)
            last = max(last, ended)
            at = ended + 0.001 if one_by_one else at + 0.0002
        parent.free_at = last + 0.002
        self._end(parent, members, begun, parent.free_at, parent.rss, None)
        self._done(parent)

    def run(self) -> None:
        rng = self.rng
        while self.written < self.calls:
            if rng.random() < PARENT_SHARE:
                self.family()
            else:
                self.plain()
        for process in (*self.processes, self.driver):
            process.writer.close()


def write_real_session(directory: Path, calls: int, *, submits: bool = True) -> int:
    """About ``calls`` calls of the shape above (see the module), in ``directory``.

    ``submits=False`` leaves out the ``call.submit`` records (a session as the kit wrote
    them before it recorded submissions).

    Returns:
        How many events were written (about three per call, two without submissions).
    """
    run = _Run(directory, calls, submits=submits)
    run.run()
    return run.events
