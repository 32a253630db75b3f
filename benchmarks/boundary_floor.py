"""The least a crash-safe record of each call can cost, beside the kit's, in one run.

Issue 26 asks actor calls with events (log=True) to cost at most 1.10x plain Ray, and
the kit's boundary to keep its promise that a SIGKILL loses nothing already known: a call
that was running when its process died must still be known afterwards. This measures the
floor of that promise in Python, with hand-written records in the method itself (no kit),
so the target can be judged against what any Python record costs:

  plain              a Ray actor's method returning its argument (twice: the noise floor)
  floor 2 writes     the method writes a start line (task id, timestamp) and an end line
                     (duration), each with one os.write: the least a record can be, and
                     crash-safe (the start line is in the kernel before the user's code runs)
  floor mmap+write   the start line copied into a memory-mapped slot (crash-safe too: a
                     killed process's dirty pages stay in the file), one os.write at the
                     end for both lines: the issue's "one write per call" option
  floor mapped file  both lines copied into a per-process file mapped MAP_SHARED (blocks
                     reserved with os.posix_fallocate, grown 1 MiB at a time): no system
                     call per call (issue 43; recorder_floor.py takes it apart in one
                     process and proves it survives a kill -9)
  kit log=False      @debuggable(log=False)
  kit log=True       @debuggable (call.start, call.end with memory and CPU figures, the
                     driver's call.submit record)

The same for tasks (issue 26: log=True at most 1.05x plain): a plain task returning its
argument (twice), one writing its own start and end lines (floor 2 writes, the file opened
once per worker), and @debuggable's.

Calls are submitted together, then one ray.get (as overhead.py). Interleaved rounds in
rotating order, until the two plain variants of each agree within 3%.

Three runs on 2026-12-02 (a loaded machine: noise floors 1.00 to 1.07): actor calls with
floor 2 writes 1.18x to 1.26x plain, floor mmap+write 1.12x to 1.20x, floor mapped file
1.06x to 1.16x, kit log=True 1.36x to 1.51x (docs/internals.md, "Why the writer is
os.write per line").

Run: python benchmarks/boundary_floor.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import mmap
import os
import tempfile
import time

import ray
from _harness import actor_calls, arguments, cache_bytecode, interleave_until_stable, print_ratios

from raytrace_kit import debuggable


class Echo:
    def echo(self, x: int) -> int:
        return x


class TwoWrites:
    """Start and end lines, one os.write each: the minimal crash-safe record."""

    def __init__(self, directory: str) -> None:
        path = os.path.join(directory, f"floor-{os.getpid()}.jsonl")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.worker = ray._private.worker.global_worker

    def echo(self, x: int) -> int:
        task = self.worker.current_task_id.hex()
        started = time.perf_counter()
        os.write(
            self.fd, f'{{"t":{time.time()},"event":"call.start","task_id":"{task}"}}\n'.encode()
        )
        result = x
        took = time.perf_counter() - started
        os.write(
            self.fd,
            f'{{"t":{time.time()},"event":"call.end","task_id":"{task}","duration_s":{took}}}\n'.encode(),
        )
        return result


class MmapOneWrite:
    """The start line in a memory-mapped slot; one os.write at the end for both lines."""

    def __init__(self, directory: str) -> None:
        path = os.path.join(directory, f"floor-mmap-{os.getpid()}.jsonl")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        slots = os.open(
            os.path.join(directory, f"inflight-{os.getpid()}"), os.O_RDWR | os.O_CREAT, 0o600
        )
        os.ftruncate(slots, 4096)
        self.slot = mmap.mmap(slots, 4096)
        self.worker = ray._private.worker.global_worker

    def echo(self, x: int) -> int:
        task = self.worker.current_task_id.hex()
        started = time.perf_counter()
        line = f'{{"t":{time.time()},"event":"call.start","task_id":"{task}"}}\n'.encode()
        self.slot[: len(line)] = line
        result = x
        took = time.perf_counter() - started
        end = f'{{"t":{time.time()},"event":"call.end","task_id":"{task}","duration_s":{took}}}\n'
        os.write(self.fd, line + end.encode())
        self.slot[:1] = b"\0"  # the slot is free: no call in flight
        return result


class MappedFile:
    """Start and end lines copied into a file mapped shared: a memory copy per line."""

    CHUNK = 1 << 20

    def __init__(self, directory: str) -> None:
        path = os.path.join(directory, f"floor-mapped-{os.getpid()}.jsonl")
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.posix_fallocate(self.fd, 0, self.CHUNK)
        self.map = mmap.mmap(self.fd, self.CHUNK)
        self.size, self.at = self.CHUNK, 0
        self.worker = ray._private.worker.global_worker

    def _line(self, line: bytes) -> None:
        stop = self.at + len(line)
        if stop > self.size:  # reserve the blocks first: a full disk is an error, no SIGBUS
            os.posix_fallocate(self.fd, self.size, self.CHUNK)
            self.size += self.CHUNK
            self.map.resize(self.size)
        self.map[self.at : stop] = line
        self.at = stop

    def echo(self, x: int) -> int:
        task = self.worker.current_task_id.hex()
        started = time.perf_counter()
        self._line(f'{{"t":{time.time()},"event":"call.start","task_id":"{task}"}}\n'.encode())
        result = x
        took = time.perf_counter() - started
        end = f'{{"t":{time.time()},"event":"call.end","task_id":"{task}","duration_s":{took}}}\n'
        self._line(end.encode())
        return result


def trivial(x: int) -> int:
    return x


_FILES: dict[str, int] = {}  # a task worker's record file, opened by its first call


def writes_its_own(x: int, directory: str) -> int:
    """A task writing its start and end lines, one os.write each (as TwoWrites.echo)."""
    fd = _FILES.get(directory)
    if fd is None:
        path = os.path.join(directory, f"floor-task-{os.getpid()}.jsonl")
        fd = _FILES[directory] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    task = ray._private.worker.global_worker.current_task_id.hex()
    started = time.perf_counter()
    os.write(fd, f'{{"t":{time.time()},"event":"call.start","task_id":"{task}"}}\n'.encode())
    result = x
    took = time.perf_counter() - started
    end = f'{{"t":{time.time()},"event":"call.end","task_id":"{task}","duration_s":{took}}}\n'
    os.write(fd, end.encode())
    return result


def task_calls(fn, n: int, *extra: object) -> float:
    start = time.perf_counter()
    ray.get([fn.remote(i, *extra) for i in range(n)])
    return time.perf_counter() - start


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=2000, rounds=7)
    n = args.calls
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as directory:
        plain = ray.remote(Echo)
        actors = {
            "plain": plain.remote(),
            "plain (2)": plain.remote(),
            "floor 2 writes": ray.remote(TwoWrites).remote(directory),
            "floor mmap+write": ray.remote(MmapOneWrite).remote(directory),
            "floor mapped file": ray.remote(MappedFile).remote(directory),
            "kit log=False": debuggable(log=False)(plain).remote(),
            "kit log=True": debuggable(plain).remote(),
        }
        task = ray.remote(trivial)
        tasks = {
            "plain": (task, ()),
            "plain (2)": (ray.remote(trivial), ()),
            "floor 2 writes": (ray.remote(writes_its_own), (directory,)),
            "kit log=False": (debuggable(log=False)(task), ()),
            "kit log=True": (debuggable(task), ()),
        }
        for handle in actors.values():  # warm up: every actor alive, its method exported
            actor_calls(handle, 200)
        for fn, extra in tasks.values():  # and every task's function exported
            task_calls(fn, 200, *extra)
        samples = interleave_until_stable(
            {
                **{
                    f"actor {label}": (lambda a=a: actor_calls(a, n)) for label, a in actors.items()
                },
                **{
                    f"task {label}": (lambda f=f, e=e: task_calls(f, n, *e))
                    for label, (f, e) in tasks.items()
                },
            },
            args.rounds,
            args.max_rounds,
            [("actor plain", "actor plain (2)"), ("task plain", "task plain (2)")],
        )
        ray.shutdown()
    for kind in ("actor", "task"):
        mine = {k.split(" ", 1)[1]: v for k, v in samples.items() if k.startswith(kind)}
        print_ratios(f"{kind.capitalize()} calls", mine, n, "plain", "plain (2)")
    print("targets (issue 26): actor calls log=True <= 1.10x plain, log=False <= 1.03x;")
    print("                    tasks log=True <= 1.05x plain")


if __name__ == "__main__":
    main()
