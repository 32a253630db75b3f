"""The sampling profiler: where a slow call spends its time, by line, without ptrace.

A remote function does two things, one twice as costly as the other; another waits
in ``ray.get``. Sampled at 200 Hz from inside their workers, the samples name the costly
line, and put the waiting call's time in ``ray.get``, as waiting. The samples are then
written as folded stacks (flamegraph.pl, inferno), speedscope's JSON and pprof.

Run: python examples/sampling_profiler.py   (starts its own local Ray)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable(sample=200)
@ray.remote
def crunch(cpu_seconds: float) -> int:
    started = time.thread_time()
    rounds = 0
    while time.thread_time() - started < cpu_seconds:
        sum(i * i % 7 for i in range(60_000))  # the costly line: about two thirds of the time
        sum(range(20_000 * 8))  # the rest, nearly
        rounds += 1
    return rounds


@debuggable(sample=200)
@ray.remote
def waiter() -> int:
    return ray.get(crunch.remote(0.5))  # waiting here, not running


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print("rounds:", ray.get([crunch.remote(1.0), waiter.remote()]))
        logs = raytrace_kit.log_dir()
        time.sleep(1.2)  # the samplers flush each second: wait for the last one
    finally:
        ray.shutdown()
    out = Path(tempfile.mkdtemp(prefix="sampling-"))
    for fmt, name in (("collapsed", "run.folded"), ("speedscope", "run.speedscope.json"),
                      ("pprof", "run.pb.gz")):  # fmt: skip
        command = [sys.executable, "-m", "raytrace_kit", "profile", str(logs), "-q",
                   "--function", "crunch", "--format", fmt, "-o", str(out / name)]  # fmt: skip
        done = subprocess.run(  # noqa: S603 -- this interpreter, our own arguments
            command, capture_output=True, text=True, check=True
        )
        print(done.stdout.strip())
    folded = (out / "run.folded").read_text().splitlines()
    print("hottest stacks (folded):")
    for line in sorted(folded, key=lambda t: -int(t.rsplit(" ", 1)[1]))[:2]:
        print("  ..." + line[-110:])
    idle = out / "waiter.folded"
    subprocess.run(  # noqa: S603 -- this interpreter, our own arguments
        [sys.executable, "-m", "raytrace_kit", "profile", str(logs), "-q", "--idle",
         "--function", "waiter", "--format", "collapsed", "-o", str(idle)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    waits = sum(int(t.rsplit(" ", 1)[1]) for t in idle.read_text().splitlines())
    print(f"waiter: {waits} samples, in ray.get: " + str("get_objects" in idle.read_text()))
    print(f"files in {out}: open run.speedscope.json at https://www.speedscope.app")


if __name__ == "__main__":
    main()
