"""What keeping a cProfile profile to its own thread costs on Python 3.12+.

From Python 3.12 cProfile records every thread's calls (``sys.monitoring``); the kit puts
a check of the thread in front of each of cProfile's callbacks (``profilers._this_thread_only``).
Thread CPU of a call-heavy body (fib(22): 57,000 calls), interleaved in rotating order:
  no profiler                  the body alone, for scale
  cProfile                     cProfile.Profile around the body (twice: the noise floor)
  cProfile, this thread only   the same with the kit's filter (a no-op before 3.12)

Run with the Python to measure: python benchmarks/cprofile_threads.py [--rounds 15]
(no Ray needed; the kit from this checkout, or installed).
"""

from __future__ import annotations

import cProfile
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from _harness import arguments, interleave

from raytrace_kit._worker.profilers import _this_thread_only


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def profiled(filtered: bool) -> Callable[[], float]:
    def run() -> float:
        profile = cProfile.Profile()
        profile.enable()
        if filtered:
            _this_thread_only()
        started = time.thread_time()
        fib(22)
        took = time.thread_time() - started
        profile.disable()
        return took

    return run


def alone() -> float:
    started = time.thread_time()
    fib(22)
    return time.thread_time() - started


def main() -> None:
    args = arguments(__doc__, calls=1, rounds=15)
    samples = interleave(
        {
            "no profiler": alone,
            "cProfile": profiled(filtered=False),
            "cProfile (2)": profiled(filtered=False),
            "cProfile, this thread only": profiled(filtered=True),
        },
        args.rounds,
    )
    medians = {label: statistics.median(values) for label, values in samples.items()}
    base = medians["cProfile"]
    print(f"\nPython {sys.version.split()[0]}: thread CPU of fib(22), median of {args.rounds}")
    for label, value in medians.items():
        print(f"  {label:<28}{value * 1e3:8.2f} ms  {value / base:5.2f}x cProfile")
    print(f"  noise floor (cProfile twice): {medians['cProfile (2)'] / base:.3f}")


if __name__ == "__main__":
    main()
