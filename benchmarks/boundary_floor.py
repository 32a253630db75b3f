"""The least a crash-safe record of each actor call can cost, beside the kit's, in one run.

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
  kit log=False      @debuggable(log=False)
  kit log=True       @debuggable (call.start, call.end with memory and CPU figures, the
                     driver's call.submit record)

Calls are submitted together, then one ray.get (as overhead.py). Interleaved rounds in
rotating order, until the two plain variants agree within 3%.

Run: python benchmarks/boundary_floor.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import mmap
import os
import tempfile
import time

import ray
from _harness import actor_calls, arguments, interleave_until_stable, print_ratios

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


def main() -> None:
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
            "kit log=False": debuggable(log=False)(plain).remote(),
            "kit log=True": debuggable(plain).remote(),
        }
        for handle in actors.values():  # warm up: every actor alive, its method exported
            actor_calls(handle, 200)
        samples = interleave_until_stable(
            {label: (lambda a=a: actor_calls(a, n)) for label, a in actors.items()},
            args.rounds,
            args.max_rounds,
            [("plain", "plain (2)")],
        )
        ray.shutdown()
    print_ratios("Actor calls", samples, n, "plain", "plain (2)")
    print("target (issue 26): kit log=True <= 1.10x plain, kit log=False <= 1.03x")


if __name__ == "__main__":
    main()
