"""The floor of each way to keep the kill -9 promise, per call, in one process (issue 43, part 1).

The promise (docs/reliability.md): a record written before the code it describes survives
a ``kill -9`` of the process. Each variant records one call as the kit does, a
``call.start`` line and a ``call.end`` line rendered by the kit's own encoder (649 and 744
bytes: an actor call's ids, memory figures and outcome; a local task's are 580 and 675),
and is timed in thread CPU (``time.thread_time``: system calls and page faults count,
another process on the machine little), in interleaved rounds in rotating order, until two
identical variants agree:

  os.write x2            one os.write per line on an O_APPEND descriptor: today's floor
  os.write x2 (2)        the same again: the noise floor
  slot + 1 writev        the start line copied into a slot of a small file mapped shared
                         (it survives a kill -9 there), then at the end one os.writev of
                         both lines and the slot cleared: one system call per call, for a
                         call that ends before a threshold (a longer one writes its start)
  mapped                 the lines copied into a per-process file mapped MAP_SHARED, its
                         blocks reserved first (os.posix_fallocate) and grown 1 MiB at a
                         time; the first NUL byte is the end of what was written
  mapped + cursor        the same, and the written length stored after each line in a
                         word of a second mapped file (for readers that want a length)
  mapped, pages faulted  "mapped" with every page of the file written once before the
                         clock starts: the copy alone, without the kernel's first-write
                         fault per 4 KiB page (what a writer gets at best from a thread
                         that touches pages ahead of it)
  EventWriter x2         the kit's writer today (lock, a second's check, size, rotation)
  MappedLog x2           a writer of the mapped kind: lock, growth, the same copy
  render: kit f-strings  the kit's rendering of both lines (call_members, call_line x2,
                         memory_members, end_members), no write
  render: msgspec        the same lines from two msgspec Structs, one encode each
  kit today, whole       render with f-strings + os.write x2: a call's record path today
  msgspec + mapped       render with msgspec (encode_into a buffer) + mapped copy
  kit local log=True     a local-mode call of @debuggable (events on), and again (noise)
  kit local log=False    the same with events off: the difference is what the kit's events
                         cost per call in this process, the yardstick of the decision

Before measuring, it proves that the mapped variant keeps the promise: a forked child
writes N records into a mapped file (growing it several times), says so through a pipe,
and is killed with SIGKILL before it closes, unmaps or syncs anything; all N records are
read back, whole and in order, up to the first NUL byte. The figures are printed only if
that holds.

Then the same records in calls Ray delivers: one actor records each call one of five ways
(os.write x2 twice, slot + 1 writev, EventWriter x2, MappedLog x2), rounds rotating, each
record timed in the worker's thread CPU.

Figures (2026-12-02, 2 cores shared with other jobs, µs of thread CPU per call, medians of
interleaved rounds; the noise floor is two identical variants' ratio):

  variant                   us/call      x os.write x2
  os.write x2               3.50-3.73    1.00
  os.write x2 (2)           3.42-3.67    0.98-1.00   (the noise floor)
  slot + 1 writev           2.76-2.99    0.79-0.83
  mapped                    2.16-2.38    0.62-0.65
  mapped + cursor           2.32-2.59    0.66-0.69
  mapped, pages faulted     0.28-0.40    0.08-0.11
  EventWriter x2            5.22-5.54    1.49
  MappedLog x2              2.93-3.38    0.84-0.92
  render: kit f-strings     5.10-5.92    1.46-1.62
  render: msgspec           4.65-4.97    1.33-1.38
  kit today, whole          9.37-10.08   2.68-2.73
  msgspec + mapped          6.94-7.37    1.98-2.03
  kit local log=True        29.3-33.4                (twice: noise floor 0.997-1.016)
  kit local log=False       8.97-10.00

  in calls Ray delivers     us/call      x os.write x2
  os.write x2               8.07         1.00
  os.write x2 (2)           8.09         1.00        (the noise floor)
  slot + 1 writev           9.23         1.14
  EventWriter x2            10.64        1.32
  MappedLog x2              5.02         0.62

Three runs of 4000 calls a round (21 to 42 rounds; noise floors 0.977-1.004 for os.write
x2 twice), the last with Ray's part (2000 calls a round, 21 rounds). Lines of 648-649 and
743-744 bytes.

The decision (issue 43, part 2: build it only if the floor moves by half the kit's
overhead): it does not. The kit's events cost 20.3-23.4 µs per call here (log=True less
log=False); half is 10-12 µs. The floor moves by 1.3 µs (os.write x2 to the mapped file,
6-7% of the events' cost); writer to writer (EventWriter to MappedLog) by 2.1-2.3 µs
(10-11%); rendering and recording together (today's to msgspec + mapped) by 2.4-2.7 µs
(12%). Even the copy alone, with every page faulted before (a best case no Python writer
gets for free), saves 3.2-3.3 µs (15%). In calls Ray delivers, writer to writer saves
5.6 µs of the kit's 42 µs a call there (boundary_parts.py): 13%. A mapped file is not a
memory copy per line: the first store into each 4 KiB page of a shared file mapping is a
page fault (the filesystem maps the block and zeroes the page), one per three calls at
these sizes, and that costs most of what the system call cost. The rest of the events'
cost is Python around the record (context, ids, figures, glue: part 3 of the issue), not
the system call. See docs/internals.md, "Why the writer is os.write per line".

Run: python benchmarks/recorder_floor.py [--calls 3000] [--rounds 15] (the figures: 4000, 21)
"""

from __future__ import annotations

import mmap
import os
import signal
import statistics
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import ray
from _call_structs import End, Start
from _harness import arguments, cache_bytecode, floor, interleave_until_stable

from raytrace_kit import debuggable, local_mode
from raytrace_kit._output import encode
from raytrace_kit._output.writer import EventWriter
from raytrace_kit._process import ProcessIdentity

CHUNK = 1 << 20  # a mapped file grows by this much: reserved, then mapped
SLOT = 4096  # one page: the in-flight start line of one thread
_IDENTITY = ProcessIdentity(
    job_id="02000000",
    node_id="1fa05fafc9551bd80ef2c486e3521372c170f8ed90cd16d82bf40e15",
    worker_id="b44bb0c9c3f8173309b6a58383bd9e822f533f5cbcf8674255b45e24",
    pid=os.getpid(),
    is_worker=True,
)
_CALL = {
    "call_id": "9b8f378285000004",
    "function": "pipeline.stages.Tokenizer.encode",
    "kind": "actor_method",
    "task_id": "9b8f378285000005ffffffffffffffffffffffff02000000",
    "actor_id": "5c0b0e6e32ac8cf5a7fc8a5a02000000",
    "task_name": "Tokenizer.encode",
}
_SPEC = encode.members({"function": _CALL["function"], "kind": _CALL["kind"]})
_FIGURES = (74375168, 44236800, 74375168)


def kit_lines() -> tuple[bytes, bytes]:
    """A call's ``call.start`` and ``call.end`` lines, rendered by the kit's encoder."""
    fragment = encode.call_members(
        call_id=_CALL["call_id"],
        spec_fragment=_SPEC,
        mode="ray",
        task_id=_CALL["task_id"],
        actor_id=_CALL["actor_id"],
        identity=_IDENTITY,
        attempt=0,
        task_name=_CALL["task_name"],
    )
    start = encode.call_line("call.start", "info", fragment, encode.memory_members(_FIGURES))
    tail = encode.end_members(0.000123, None, None, rss_start=_FIGURES[0], figures=_FIGURES)
    return start, encode.call_line("call.end", "info", fragment, tail)


class MappedLog:
    """A JSON Lines file mapped shared into this process: each line is a memory copy.

    The mapped pages are the file's pages in the kernel's page cache: what is copied into
    them is the file's content for every reader at once, and stays when the process dies.
    Blocks are reserved before they are mapped (a full disk fails ``posix_fallocate``, not
    a store into the mapping, which would be a SIGBUS). JSON text never holds a NUL byte,
    so the first NUL is the end of what was written; a clean close truncates there.
    """

    def __init__(self, path: Path, chunk: int = CHUNK) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        self.path = path
        self.fd = os.open(path, flags, 0o600)
        self.chunk = chunk
        os.posix_fallocate(self.fd, 0, chunk)
        self.map = mmap.mmap(self.fd, chunk)  # MAP_SHARED, PROT_READ | PROT_WRITE
        self.size = chunk
        self.cursor = 0
        self.lock = threading.Lock()

    def write(self, line: bytes) -> None:
        """Append ``line`` (ending in a newline): on the file's pages when it returns."""
        with self.lock:
            end = self.cursor + len(line)
            if end > self.size:
                self.grow(end)
            self.map[self.cursor : end] = line
            self.cursor = end

    def grow(self, end: int) -> int:
        """Reserve and map whole chunks up to ``end`` at least; the new size."""
        size = self.size
        if end <= size:
            return size  # posix_fallocate refuses a length of 0 (EINVAL)
        while size < end:
            size += self.chunk
        os.posix_fallocate(self.fd, self.size, size - self.size)
        self.map.resize(size)
        self.size = size
        return size

    def close(self) -> None:
        """A clean close: the file cut to what was written (no NUL tail left)."""
        self.map.close()
        os.ftruncate(self.fd, self.cursor)
        os.close(self.fd)


def written(data: bytes) -> list[bytes]:
    """The lines of a mapped file: up to its unwritten tail (first NUL), whole lines only."""
    end = data.find(b"\0")
    text = data if end < 0 else data[:end]
    lines = text.split(b"\n")
    return lines[:-1]  # the last piece is empty, or a line cut by the kill: not a record


def record(number: int) -> bytes:
    """The ``number``-th record of the kill -9 proof: a line the size of a call.start."""
    return b'{"n":%d,"event":"call.start","pad":"%s"}\n' % (number, b"x" * 540)


def prove_mapped_survives_kill(directory: Path, n: int = 20000) -> None:
    """A child writes ``n`` records into a mapped file and is SIGKILLed: all ``n`` are there.

    The child grows the file 64 KiB at a time (over 150 growths), signals through a pipe
    once the last record is copied, then waits to be killed: no close, munmap or msync.

    Raises:
        SystemExit: A record is missing, cut or out of order.
    """
    path = directory / "killed.jsonl"
    ready, done = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os and mmap from here, then killed
        try:
            os.close(ready)
            log = MappedLog(path, chunk=64 * 1024)
            for number in range(n):
                log.write(record(number))
            os.write(done, b"1")
            while True:
                signal.pause()
        finally:
            os._exit(1)  # never reached but for an error: the parent sees no SIGKILL
    os.close(done)
    said = os.read(ready, 1)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(ready)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    data = path.read_bytes()
    lines = written(data)
    whole = lines == [record(number)[:-1] for number in range(n)]
    if not (said == b"1" and killed and whole):
        msg = (
            f"the mapped file lost records to a kill -9: child said {said!r}, killed={killed}, "
            f"{len(lines)} of {n} lines back"
        )
        raise SystemExit(msg)
    tail = len(data) - sum(len(line) + 1 for line in lines)
    print(
        f"kill -9 proof: a child wrote {n} records ({(len(data) - tail) / 2**20:.1f} MiB) into a "
        f"mapped file and was SIGKILLed before closing it; all {n} read back whole and in order "
        f"(file {len(data)} bytes, {tail} of them the unwritten NUL tail, cut by the reader)"
    )


_ENCODER = msgspec.json.Encoder()
_ID = _IDENTITY


def msgspec_start() -> Start:
    c = _CALL
    return Start(
        encode.now(), "info", "call.start", 2, c["call_id"], None, None, c["function"],
        c["kind"], "ray", c["task_id"], c["task_name"], c["actor_id"], _ID.job_id,
        _ID.node_id, _ID.worker_id, _ID.pid, 0, *_FIGURES,
    )  # fmt: skip


def msgspec_end() -> End:
    c = _CALL
    return End(
        encode.now(), "info", "call.end", 2, c["call_id"], None, None, c["function"],
        c["kind"], "ray", c["task_id"], c["task_name"], c["actor_id"], _ID.job_id,
        _ID.node_id, _ID.worker_id, _ID.pid, 0, 0.000123, None, None, "ok", *_FIGURES,
        _FIGURES[0],
    )  # fmt: skip


class Variants:
    """Each way to record a call, run ``n`` times in a row, timed in thread CPU per call."""

    def __init__(self, directory: Path, n: int) -> None:
        self.directory, self.n = directory, n
        self.start, self.end = kit_lines()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self.fd = os.open(directory / "appended.jsonl", flags, 0o600)
        slots = os.open(directory / "inflight", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.posix_fallocate(slots, 0, SLOT)
        self.slot = mmap.mmap(slots, SLOT)
        os.close(slots)
        self.kit_writer = EventWriter(directory / "kit.jsonl")
        self.files = 0

    def _fresh(self) -> Path:
        self.files += 1
        return self.directory / f"mapped-{self.files}.jsonl"

    def _timed(self, body: Callable[[int], None]) -> float:
        os.ftruncate(self.fd, 0)  # each round from an empty file, as a mapped one
        began = time.thread_time()
        body(self.n)
        return (time.thread_time() - began) / self.n

    def writes(self) -> float:
        fd, start, end, write = self.fd, self.start, self.end, os.write

        def body(n: int) -> None:
            for _ in range(n):
                write(fd, start)
                write(fd, end)

        return self._timed(body)

    def slot_writev(self) -> float:
        fd, start, end, slot, writev = self.fd, self.start, self.end, self.slot, os.writev
        size = len(start)

        def body(n: int) -> None:
            for _ in range(n):
                slot[0:size] = start  # before the user's code: survives a kill -9 there
                writev(fd, (start, end))  # the call ended in time: both lines, one call
                slot[0:1] = b"\0"  # no call in flight

        return self._timed(body)

    def _mapped(self, cursor_word: bool, faulted: bool = False) -> float:
        log = MappedLog(self._fresh())
        if faulted:  # every page written once before the clock starts: the copy alone
            log.grow(self.n * (len(self.start) + len(self.end)))
            for page in range(0, log.size, mmap.PAGESIZE):
                log.map[page] = 0
        header_path = self._fresh()
        header_fd = os.open(header_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.posix_fallocate(header_fd, 0, mmap.PAGESIZE)
        header = mmap.mmap(header_fd, mmap.PAGESIZE)
        store = struct.Struct("<Q").pack_into
        start, end = self.start, self.end
        first, second = len(start), len(end)

        def plain(n: int) -> None:
            data, size, at = log.map, log.size, 0
            for _ in range(n):
                stop = at + first
                if stop > size:
                    size = log.grow(stop)
                data[at:stop] = start
                at = stop
                stop = at + second
                if stop > size:
                    size = log.grow(stop)
                data[at:stop] = end
                at = stop
            log.cursor = at

        def with_cursor(n: int) -> None:
            data, size, at = log.map, log.size, 0
            for _ in range(n):
                stop = at + first
                if stop > size:
                    size = log.grow(stop)
                data[at:stop] = start
                at = stop
                store(header, 0, at)  # an aligned 8-byte store: what readers may trust
                stop = at + second
                if stop > size:
                    size = log.grow(stop)
                data[at:stop] = end
                at = stop
                store(header, 0, at)
            log.cursor = at

        try:
            return self._timed(with_cursor if cursor_word else plain)
        finally:
            self._drop(log, header, header_fd, header_path)

    def mapped(self) -> float:
        return self._mapped(cursor_word=False)

    def mapped_faulted(self) -> float:
        return self._mapped(cursor_word=False, faulted=True)

    def mapped_cursor(self) -> float:
        return self._mapped(cursor_word=True)

    @staticmethod
    def _drop(log: MappedLog, header: mmap.mmap, fd: int, header_path: Path) -> None:
        """Unlink a round's files: their pages are dropped, never written back."""
        log.close()
        header.close()
        os.close(fd)
        log.path.unlink()
        header_path.unlink()

    def event_writer(self) -> float:
        write, start, end = self.kit_writer.write, self.start, self.end
        os.ftruncate(self.kit_writer._fd or self.fd, 0)

        def body(n: int) -> None:
            for _ in range(n):
                write(start)
                write(end)

        return self._timed(body)

    def mapped_log(self) -> float:
        path = self._fresh()
        log = MappedLog(path)
        write, start, end = log.write, self.start, self.end

        def body(n: int) -> None:
            for _ in range(n):
                write(start)
                write(end)

        try:
            return self._timed(body)
        finally:
            log.close()
            path.unlink()

    def render_kit(self) -> float:
        def body(n: int) -> None:
            for _ in range(n):
                kit_lines()

        return self._timed(body)

    def render_msgspec(self) -> float:
        dump = _ENCODER.encode

        def body(n: int) -> None:
            for _ in range(n):
                _ = dump(msgspec_start()) + b"\n"
                _ = dump(msgspec_end()) + b"\n"

        return self._timed(body)

    def kit_today(self) -> float:
        fd, write = self.fd, os.write

        def body(n: int) -> None:
            for _ in range(n):
                start, end = kit_lines()
                write(fd, start)
                write(fd, end)

        return self._timed(body)

    def msgspec_mapped(self) -> float:
        path = self._fresh()
        log = MappedLog(path)
        into, buffer = _ENCODER.encode_into, bytearray(4096)

        def line(value: msgspec.Struct, at: int, size: int) -> tuple[int, int]:
            into(value, buffer)
            buffer.append(10)
            stop = at + len(buffer)
            if stop > size:
                size = log.grow(stop)
            log.map[at:stop] = buffer
            return stop, size

        def body(n: int) -> None:
            at, size = 0, log.size
            for _ in range(n):
                at, size = line(msgspec_start(), at, size)
                at, size = line(msgspec_end(), at, size)
            log.cursor = at

        try:
            return self._timed(body)
        finally:
            log.close()
            path.unlink()


WAYS = ("os.write x2", "os.write x2 (2)", "slot + 1 writev", "EventWriter x2", "MappedLog x2")


class Delivered:
    """A Ray actor recording each call one of the ways, timing the record in thread CPU.

    Ray's own work between calls leaves the caches cold (boundary_parts.py: 2.5 to 3 times
    a tight loop's figures), so these are what a record costs in calls Ray delivers.
    """

    def __init__(self, directory: str) -> None:
        self.start, self.end = kit_lines()
        where = Path(directory)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self.fd = os.open(where / f"delivered-{os.getpid()}.jsonl", flags, 0o600)
        slots = os.open(where / f"slot-{os.getpid()}", os.O_RDWR | os.O_CREAT, 0o600)
        os.posix_fallocate(slots, 0, SLOT)
        self.slot = mmap.mmap(slots, SLOT)
        self.kit = EventWriter(where / f"delivered-kit-{os.getpid()}.jsonl")
        self.log = MappedLog(where / f"delivered-mapped-{os.getpid()}.jsonl")
        self.times: list[float] = []

    def echo(self, x: int, way: int) -> int:
        start, end, clock = self.start, self.end, time.thread_time
        began = clock()
        if way < 2:  # the two os.write variants
            os.write(self.fd, start)
            os.write(self.fd, end)
        elif way == 2:  # slot + 1 writev
            self.slot[0 : len(start)] = start
            os.writev(self.fd, (start, end))
            self.slot[0:1] = b"\0"
        elif way == 3:  # EventWriter x2
            self.kit.write(start)
            self.kit.write(end)
        else:
            self.log.write(start)
            self.log.write(end)
        self.times.append(clock() - began)
        return x

    def take(self) -> float:
        """The median thread CPU (µs) of the records since the last take."""
        times, self.times = self.times, []
        return statistics.median(times) * 1e6


def delivered(directory: Path, n: int, rounds: int) -> dict[str, list[float]]:
    """Each way's record cost in calls Ray delivers: one actor, interleaved rotating rounds."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        actor = ray.remote(Delivered).remote(str(directory))
        for way in range(len(WAYS)):  # warm up
            ray.get([actor.echo.remote(i, way) for i in range(200)])
            ray.get(actor.take.remote())
        samples: dict[str, list[float]] = {label: [] for label in WAYS}
        order = list(range(len(WAYS)))
        for number in range(rounds):
            shift = number % len(order)
            for way in order[shift:] + order[:shift]:
                ray.get([actor.echo.remote(i, way) for i in range(n)])
                samples[WAYS[way]].append(ray.get(actor.take.remote()))
        return samples
    finally:
        ray.shutdown()


def local_calls(fn: object, n: int) -> float:
    """Thread CPU per local-mode call of ``fn`` (a debuggable task), ``n`` in a row."""
    with local_mode():
        began = time.thread_time()
        for i in range(n):
            ray.get(fn.remote(i))  # type: ignore[attr-defined]
        return (time.thread_time() - began) / n


def work(x: int) -> int:
    return x


def check_renderings() -> None:
    """The two renderings hold the same members, and every line is one JSON object."""
    start, end = kit_lines()
    ours = _ENCODER.encode(msgspec_start()), _ENCODER.encode(msgspec_end())
    for kit, other in zip((start, end), ours, strict=True):
        a, b = msgspec.json.decode(kit), msgspec.json.decode(other)
        assert list(a) == list(b), "msgspec's line has other members, or another order"
    print(f"lines: call.start {len(start)} bytes, call.end {len(end)} bytes (the kit's encoder)")


LABELS = {
    "os.write x2": "writes",
    "os.write x2 (2)": "writes",
    "slot + 1 writev": "slot_writev",
    "mapped": "mapped",
    "mapped + cursor": "mapped_cursor",
    "mapped, pages faulted": "mapped_faulted",
    "EventWriter x2": "event_writer",
    "MappedLog x2": "mapped_log",
    "render: kit f-strings": "render_kit",
    "render: msgspec": "render_msgspec",
    "kit today, whole": "kit_today",
    "msgspec + mapped": "msgspec_mapped",
}


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=3000, rounds=15)
    with tempfile.TemporaryDirectory(prefix="recorder-floor-") as name:
        directory = Path(name)
        prove_mapped_survives_kill(directory)
        check_renderings()
        os.environ["RAYTRACE_LOG_DIR"] = str(directory / "logs")
        logged = debuggable(ray.remote(work))
        quiet = logged.with_debug(log=False)
        variants = Variants(directory, args.calls)
        table: dict[str, Callable[[], float]] = {
            label: getattr(variants, method) for label, method in LABELS.items()
        }
        table["kit local log=True"] = lambda: local_calls(logged, args.calls)
        table["kit local log=True (2)"] = lambda: local_calls(logged, args.calls)
        table["kit local log=False"] = lambda: local_calls(quiet, args.calls)
        for run in table.values():  # warm up: files open, caches filled
            run()
        samples = interleave_until_stable(
            table,
            args.rounds,
            args.max_rounds,
            [("os.write x2", "os.write x2 (2)"), ("kit local log=True", "kit local log=True (2)")],
        )
        ray_samples = delivered(directory, min(args.calls, 2000), args.rounds)
    report(samples, args.calls)
    med = {label: statistics.median(values) for label, values in ray_samples.items()}
    print(f"\nIn calls Ray delivers (an actor, median of {args.rounds} rounds' medians)")
    for label, value in med.items():
        print(f"  {label:<26}{value:9.2f}{value / med['os.write x2']:14.2f}x")
    print(f"  noise floor, os.write x2 twice: {med['os.write x2 (2)'] / med['os.write x2']:.3f}")
    saved = med["os.write x2"] - min(med["slot + 1 writev"], med["MappedLog x2"])
    print(
        f"The floor moves by {saved:.2f} us here; writer to writer (EventWriter x2 less "
        f"MappedLog x2) by {med['EventWriter x2'] - med['MappedLog x2']:.2f} us."
    )


def report(samples: dict[str, list[float]], n: int) -> None:
    """The table: µs per call, ratio to os.write x2, and the decision's two figures."""
    med = {label: statistics.median(values) * 1e6 for label, values in samples.items()}
    base = med["os.write x2"]
    rounds = len(samples["os.write x2"])
    print(f"\nThread CPU per call ({n} calls a round, median of {rounds} interleaved rounds)")
    print(f"  {'variant':<26}{'us/call':>9}{'x os.write x2':>15}")
    for label, value in med.items():
        print(f"  {label:<26}{value:9.2f}{value / base:14.2f}x")
    print(
        f"  noise floor, os.write x2 twice: {floor(samples, 'os.write x2', 'os.write x2 (2)'):.3f}"
    )
    twin = floor(samples, "kit local log=True", "kit local log=True (2)")
    print(f"  noise floor, kit local log=True twice: {twin:.3f}")
    events = med["kit local log=True"] - med["kit local log=False"]
    best = min(med["mapped"], med["mapped + cursor"], med["slot + 1 writev"])
    moved = base - best
    print(f"\nThe kit's events cost {events:.2f} us per call here (log=True less log=False).")
    print(
        f"The floor moves by {moved:.2f} us (os.write x2 less the cheapest other way), "
        f"{moved / events:.0%} of that; the issue's bar is half ({events / 2:.2f} us)."
    )
    whole = med["kit today, whole"] - med["msgspec + mapped"]
    print(
        f"Rendering and recording together move by {whole:.2f} us ({whole / events:.0%} of "
        "the events' cost): kit today, whole less msgspec + mapped."
    )


if __name__ == "__main__":
    main()
