"""A large session's report read on two cores: its files shared by two processes, then merged.

Each process reads its share into the records a report of files fills (``tally.py``,
``queues.py``: the same folds, the same columns): whole processes, in the order a report
reads them, the one that crosses the half cut at a byte offset when it holds only
submissions (a driver's file, often the largest). The shares' records merge, each by its
own ``merge()`` (``sums.py``, ``Queues.merge``), in that order, and are finished by the
code that finishes a one-pass report: the same report, byte for byte. The readers are
forks of this process (no import again; the same ``hash()`` of a task id in each). One
process reads the session (``run/sections.py``) below :data:`PARALLEL_MIN_BYTES` (a second
costs more than it saves), with one CPU, or where forking is not safe (threads run).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.profiles.samples import read_samples
from raytrace_kit._reports.reading.calls import Piece, StartLine, distinct_processes, iter_calls
from raytrace_kit._reports.reading.counts import has_submissions
from raytrace_kit._reports.reading.driver import Waited, read_driver
from raytrace_kit._reports.reading.session import Session, instant, open_session
from raytrace_kit._reports.run import sections as one_pass
from raytrace_kit._reports.run.blocked import BlockedLoops, each
from raytrace_kit._reports.run.data_ops import DataOps
from raytrace_kit._reports.run.interrupted import RayLogs
from raytrace_kit._reports.run.queues import Queues
from raytrace_kit._reports.run.sums import Children, Function
from raytrace_kit._reports.run.tally import Tally

if TYPE_CHECKING:
    from datetime import datetime
    from multiprocessing.connection import Connection

    from raytrace_kit._output.schema import Call

__all__ = ["PARALLEL_MIN_BYTES", "report_in_parallel", "shares"]

PARALLEL_MIN_BYTES = 96 * 2**20  # of event files: below it, one process is as fast (measured)
_HEAD = 2**20  # a process's first bytes: a submitter's file has no call.start in them
_CALL_LINE = (b'"event":"call.start"', b'"event":"call.end"')

Share = list[list[Path | Piece]]  # the processes one reader reads, each its files or pieces


def report_in_parallel(
    source: str | os.PathLike[str] | Session | None = None,
    *,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    processes: int | None = None,
) -> one_pass.Report:
    """:func:`~raytrace_kit._reports.run.sections.report`, on two cores when the session is large.

    ``processes``: 1 for one pass in this process, 2 for two readers whatever the size;
    ``None`` chooses (see the module). The report is the same either way.
    """
    session = source if isinstance(source, Session) else open_session(source)
    start, end = instant(since), instant(until)
    wanted = 2 if processes is None and _worth_it(session) else processes or 1
    valid = session.files and (start is None or end is None or start < end)
    cut = shares(session.files, wanted) if wanted > 1 and valid else None
    if cut is None:  # one pass (which also says what is wrong with the arguments)
        return one_pass.report(session, since=since, until=until)
    try:
        return _in_parallel(session, cut, start, end)
    except _OnePass:
        return one_pass.report(session, since=since, until=until)


def _worth_it(session: Session) -> bool:
    """Whether two readers beat one here: a second CPU, forking safe, files large enough."""
    if len(os.sched_getaffinity(0)) < 2 or threading.active_count() > 1:
        return False
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return sum(_size(file) for file in session.files) >= PARALLEL_MIN_BYTES


class _OnePass(Exception):  # noqa: N818 -- not an error: the session is read in one pass
    """A reader found calls in a process cut in pieces (they cannot join there), or failed."""


def _in_parallel(
    session: Session, cut: list[Share], start: str | None, end: str | None
) -> one_pass.Report:
    """The shares read by one process each, their records merged, finished as one pass is."""
    driver = read_driver(session.driver_files())
    joined = has_submissions(session.files)
    if joined:  # the readers pack their columns with numpy, and so does the merge: once
        import numpy  # noqa: F401, PLC0415 -- only for a session with submissions (150 ms)
    readers = _Readers([(share, joined, start, end, driver.wanted) for share in cut])
    try:
        parts = readers.read()
    finally:
        readers.close()
    tally = Tally(start, end, waited=driver.wanted, queues=parts[0]["queues"])
    for rank, part in enumerate(parts):
        tally.merge(part["sums"])
        tally.lanes.extend(part["lanes"])
        tally.names.merge(part["names"])
        _merge_waited(tally.waited, part["waited"])
        if rank:
            tally.queues.merge(part["queues"])
    made = one_pass.finish(
        tally,
        driver,
        tally.queues,
        tally.queues.results(tally.stuck_status.get),
        RayLogs.here(session.root),
        source=str(session.root),
        files=len(session.files),
        blocked=BlockedLoops.merged(p["blocked"] for p in parts),
        data=DataOps.merged(p["data"] for p in parts),
    )
    one_pass.add_samples(made, tally, read_samples(session.sample_files()))
    return made


def _merge_waited(waited: dict[str, Waited | None] | None, more: dict[str, Waited | None]) -> None:
    """A share's ends of the calls the driver's long waits named: the later end wins."""
    if waited is None:
        return
    for task, found in more.items():
        known = waited.get(task)
        if found is not None and (known is None or found.ended > known.ended):
            waited[task] = found


def _read(
    share: Share,
    joined: bool,
    start: str | None,
    end: str | None,
    wanted: dict[str, Waited | None] | None,
) -> dict[str, Any]:
    """A reader's work: its share's processes through the folds a one-pass report runs."""
    queues = Queues(joined=joined, since=start, until=end)
    tally = Tally(start, end, waited=dict(wanted) if wanted is not None else None, queues=queues)
    line, blocked, data = StartLine(), BlockedLoops(start, end), DataOps(start, end)
    others, cut = each(queues.line, blocked.line), [0]
    for files in share:
        calls = data.calls(iter_calls(files, line, others, data.event))
        if any(isinstance(file, Piece) for file in files):
            calls = _counted(calls, cut)  # a process cut in pieces must hold no call
        tally.process(calls, line)
    if cut[0]:
        raise _OnePass
    tally.names.pack()
    if queues.joined:
        queues.pack()  # its columns as arrays, reduced here, on this reader's core
    return {
        "sums": tally.sums(),
        "lanes": tally.lanes,
        "names": tally.names,
        "waited": tally.waited or {},
        "queues": queues,
        "blocked": blocked.to_dict(),
        "data": data.to_dict(),
    }


def _counted(calls: Iterator[Call], seen: list[int]) -> Iterator[Call]:
    for call in calls:
        seen[0] += 1
        yield call


def shares(files: list[Path], parts: int) -> list[Share] | None:
    """The processes of ``files`` in ``parts`` shares of about equal bytes, in reading order.

    The process that crosses a share's end is cut there (at a byte offset of one of its
    files) when its first bytes hold no call, else it goes whole to one side. ``None``
    when there is nothing to share.
    """
    groups = distinct_processes(files)
    sizes = [[_size(file) for file in group] for group in groups]
    total = sum(map(sum, sizes))
    if total == 0 or parts < 2 or len(groups) < 2:
        return None
    made: list[Share] = [[] for _ in range(parts)]
    rank, done = 0, 0  # the share being filled, and the bytes of the shares before it
    for group, group_sizes in zip(groups, sizes, strict=True):
        boundary = total * (rank + 1) // parts  # where the share being filled ends
        size = sum(group_sizes)
        if rank == parts - 1 or done + size <= boundary:
            made[rank].append(list(group))
        elif _submitter(group):
            before, after = _cut(group, group_sizes, boundary - done)
            made[rank].extend([before] if before else [])
            rank += 1
            made[rank].append(after)
        elif boundary - done >= done + size - boundary:  # the most of it is before the end
            made[rank].append(list(group))
            rank += 1
        else:
            rank += 1
            made[rank].append(list(group))
        done += size
    return [share for share in made if share] if sum(map(bool, made)) > 1 else None


def _cut(group: list[Path], sizes: list[int], at: int) -> tuple[list[Path | Piece], ...]:
    """A process's files cut ``at`` bytes into them: the files or pieces before, and after."""
    before: list[Path | Piece] = []
    after: list[Path | Piece] = []
    for file, size in zip(group, sizes, strict=True):
        if at >= size:
            before.append(file)
        elif at <= 0:
            after.append(file)
        else:
            before.append(Piece(file, 0, at))
            after.append(Piece(file, at, size))
        at -= size
    return before, after


def _submitter(group: list[Path]) -> bool:
    """Whether a process's first bytes hold no call: a driver's submissions (read, not decoded)."""
    try:
        with group[0].open("rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return False
    return b'"event":"call.submit"' in head and not any(mark in head for mark in _CALL_LINE)


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


class _Readers:
    """One forked process per share, each reading it and sending its records back."""

    def __init__(self, shares: list[tuple[Any, ...]]) -> None:
        context = multiprocessing.get_context("fork")  # no re-import: this process's modules
        self.ends: list[Connection] = []
        self.processes: list[Any] = []
        for share in shares:
            mine, theirs = context.Pipe(duplex=False)
            process = context.Process(target=_serve, args=(theirs, share), daemon=True)
            process.start()
            theirs.close()
            self.ends.append(mine)
            self.processes.append(process)

    def read(self) -> list[dict[str, Any]]:
        """Each share's records, in order (a reader that failed: :class:`_OnePass`)."""
        parts = []
        for end in self.ends:
            try:
                done, answer = pickle.loads(end.recv_bytes())  # noqa: S301 -- our own fork's
            except EOFError as exc:  # the reader died (killed, out of memory)
                raise _OnePass from exc
            if not done:
                raise _OnePass(answer)
            parts.append(answer)
        return parts

    def close(self) -> None:
        """Wait for the readers (a stuck one is killed)."""
        for end in self.ends:
            end.close()
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()


def _serve(connection: Connection, share: tuple[Any, ...]) -> None:
    """A reader's life: its share read, its records sent (or why not)."""
    try:
        answer: tuple[bool, Any] = (True, _read(*share))
    except Exception as exc:  # said to the caller, which then reads the files itself
        answer = (False, f"{type(exc).__name__}: {exc}")
    written = io.BytesIO()
    _AsTheyAre(written, protocol=pickle.HIGHEST_PROTOCOL).dump(answer)
    connection.send_bytes(written.getbuffer())
    connection.close()


class _AsTheyAre(pickle.Pickler):
    """A share's records pickled as they are, for a pipe to this machine's other process.

    A node's records are packed small for the network (``Function``'s durations sorted and
    varint-coded, ``Children``'s spans so too): a third of a second of a reader's time on
    the real-shaped session, for bytes a pipe carries at once. The records merge to the
    same report either way: durations are sorted where they are read, and children's spans
    are sorted before the one-at-a-time rule (which a merge cannot make true again).
    """

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is Function or kind is Children:
            return _remade, (kind, [getattr(obj, slot) for slot in kind.__slots__])
        return NotImplemented


def _remade(kind: type[Function | Children], values: list[Any]) -> Function | Children:
    """A record of ``kind`` with its slots' ``values`` (see :class:`_AsTheyAre`)."""
    made = kind.__new__(kind)
    for slot, value in zip(kind.__slots__, values, strict=True):
        setattr(made, slot, value)
    return made
