"""The sampling profiler's cost on a CPU-bound call, and where its samples land against py-spy's.

Overhead: interleaved in one run (A B C A B C ..., rotating), in one @debuggable actor,
each call a fixed amount of pure-Python work timed inside the worker, the process's
sampler switched on or off before each variant's call (one process: nothing but the
sampler differs; separate processes differ by more than it costs here):
  off         no sampler (twice: the second copy shows the noise floor)
  sample=100  every thread of the process sampled at 100 Hz
Target (issue 44): sample=100 within 1.03x of off.

py-spy (--pyspy): the same kind of call, two lines of known weight (about 3 to 1), recorded
by the kit's sampler and by ``py-spy record --pid`` of the same worker at 100 Hz at once;
prints each one's hottest line and share. py-spy needs ptrace (root here).

Run: python benchmarks/sampling.py [--calls 1] [--rounds 9] [--max-rounds 54] [--pyspy]
"""

from __future__ import annotations

import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
from _harness import cache_bytecode, floor, interleave_until_stable, print_ratios

from raytrace_kit import debuggable

WORK = 2_000_000  # iterations per call: about 100 ms of pure Python here


class Cruncher:
    def sampling(self, on: bool) -> None:
        """Turn this process's sampler on (100 Hz) or off, between timed calls."""
        from raytrace_kit._worker import sampler  # noqa: PLC0415 -- the benchmark's switch
        from raytrace_kit._worker import state as worker_state  # noqa: PLC0415

        running = worker_state.state.sampler
        if on and running is None:
            sampler.start(100.0)
        elif not on and running is not None:
            running.stop()
            running.thread.join()
            worker_state.state.sampler = None

    def crunch(self, n: int) -> float:
        start = time.perf_counter()
        total = 0
        for i in range(n):
            total += i * i % 7
        return time.perf_counter() - start

    def pid(self) -> int:
        return os.getpid()

    def weighted(self, cpu_s: float) -> int:
        started = time.thread_time()
        rounds = 0
        while time.thread_time() - started < cpu_s:
            sum(i * i for i in range(30_000))  # line A: about three quarters
            sum(i for i in range(10_000))  # line B: about one quarter
            rounds += 1
        return rounds


def overhead(calls: int, rounds: int, max_rounds: int) -> None:
    """The same actor process with its sampler off, off, on: only the sampler differs."""
    actor = debuggable(ray.remote(Cruncher)).remote()
    ray.get(actor.crunch.remote(WORK))  # warm

    def timed(on: bool):
        def run() -> float:
            ray.get(actor.sampling.remote(on))
            return sum(ray.get([actor.crunch.remote(WORK) for _ in range(calls)]))

        return run

    samples = interleave_until_stable(
        {"off": timed(False), "off (2)": timed(False), "sample=100": timed(True)},
        rounds,
        max_rounds,
        floors=[("off", "off (2)")],
        tolerance=0.01,
    )
    print_ratios("CPU-bound call, time inside the worker", samples, calls, "off", "off (2)")
    ratio = statistics.median(samples["sample=100"]) / statistics.median(samples["off"])
    noise = floor(samples, "off", "off (2)")
    print(f"  sampling at 100 Hz: {ratio:5.3f}x (noise floor {noise:5.3f}x)")


def _shares(lines: collections.Counter[int]) -> str:
    total = sum(lines.values()) or 1
    return ", ".join(f"line {line}: {count / total:.0%}" for line, count in lines.most_common(3))


def against_py_spy() -> None:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        print("\npy-spy: not installed (pip install py-spy)")
        return
    from raytrace_kit._reports.profiles import read_samples, select  # noqa: PLC0415

    logs = Path(tempfile.mkdtemp(prefix="sampling-bench-"))
    sampled = debuggable(sample=100)(ray.remote(Cruncher))
    actor = sampled.options(runtime_env={"env_vars": {"RAYTRACE_LOG_DIR": str(logs)}}).remote()
    pid = ray.get(actor.pid.remote())
    out = logs / "py-spy.txt"
    call = actor.weighted.remote(8.0)
    recorder = subprocess.Popen(
        [py_spy, "record", "--pid", str(pid), "--rate", "100", "--format", "raw",
         "--output", str(out), "--duration", "6", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _, err = recorder.communicate(timeout=120)
    ray.get(call)
    if recorder.returncode != 0 or not out.exists():
        print(f"\npy-spy could not record the worker (ptrace denied?): {err.strip()[-300:]}")
        return
    spy: collections.Counter[int] = collections.Counter()
    for text in out.read_text().splitlines():
        stack, count = text.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        if "weighted" in stack and __file__.rsplit("/", 1)[-1] in leaf:
            spy[int(leaf.rsplit(":", 1)[1].rstrip(")"))] += int(count)
    time.sleep(1.5)  # the kit's last flush (at most 1 s after the call ended)
    kit: collections.Counter[int] = collections.Counter()
    for row in select(read_samples(logs.glob("samples-*.jsonl")), function="weighted"):
        if row.stack and row.stack[-1].file == __file__:
            kit[row.stack[-1].line] += row.count
    print("\nWhere the samples of one CPU-bound call land (100 Hz each, the same worker)")
    print(f"  py-spy (6 s of the call): {_shares(spy)}  ({sum(spy.values())} samples)")
    print(f"  kit sampler (all 8 s):    {_shares(kit)}  ({sum(kit.values())} samples)")


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--max-rounds", type=int, default=54)
    parser.add_argument("--pyspy", action="store_true", help="also compare with py-spy")
    parser.add_argument("--only-pyspy", action="store_true", help="only the py-spy comparison")
    args = parser.parse_args()
    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False)
    if not args.only_pyspy:
        overhead(args.calls, args.rounds, args.max_rounds)
    if args.pyspy or args.only_pyspy:
        against_py_spy()
    ray.shutdown()


if __name__ == "__main__":
    main()
