"""A realistic program's overhead: plain `python` vs `raytrace-kit run`, end to end.

Issue 43, part 4. The program (run with ``--workload``) is the shape of a real job on one
machine: tasks of 1 to 50 ms of CPU (their sizes drawn once, log-uniform, the same in every
run) and a second wave that takes the first's refs, an actor pool (``ray.util.ActorPool``
of two actors, 5 to 15 ms a call), an async actor (16 calls in flight, each awaiting I/O),
and a Ray Data stage (40 pandas batches through two fused map_batches: a filter, then
each batch summed by bucket). It prints how long its
work took, part by part, after ``ray.init`` and before ``ray.shutdown``.

Each run is a subprocess that starts a Ray of its own (``ray.init(address="local")``, in
a temporary directory of this benchmark's), so nothing is shared between variants:
  plain       python realistic.py --workload (twice: the noise floor)
  kit         raytrace-kit run realistic.py --workload (every remote recorded, the
              driver's record kept, Ray Data's batches as calls)
  kit (before)  with --before SRC: the same, with the raytrace_kit of SRC (another tree)
in interleaved rounds, each in its own (seeded, shuffled) order, each run started once the
last one's processes are gone. Printed: each variant's median
work time and its ratio to plain, part by part, then the whole process's wall time
(Ray's start and stop and the kit's import included), the CPU time of the whole process
tree (driver, Ray's GCS and raylet, workers: on a loaded machine it moves far less than
wall time), and the events the kit wrote.

Target (issue 43): the kit within 1.03x plain.

Run: python benchmarks/realistic.py [--rounds 5] [--max-rounds 15] [--before OTHER/src]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import ray
from _harness import cache_bytecode

HERE = Path(__file__).resolve()
PARTS = ("tasks", "actor pool", "async actor", "ray data")


def spin(units: int) -> float:
    """About a millisecond of CPU per unit (numpy, so the GIL is let go as in real code)."""
    values = np.linspace(0.0, 1.0, 20_000)
    total = 0.0
    for _ in range(units * 4):
        total += float(np.sqrt(values * values + 1.0).sum())
    return total


@ray.remote
def simulate(units: int) -> float:
    return spin(units)


@ray.remote
def combine(left: float, right: float, units: int) -> float:
    return left + right + spin(units)


@ray.remote
class Scorer:
    def __init__(self) -> None:
        self.scored = 0

    def score(self, units: int) -> float:
        self.scored += 1
        return spin(units)


@ray.remote(max_concurrency=16)
class Fetcher:
    async def fetch(self, key: int) -> int:
        await asyncio.sleep(0.01)  # an I/O wait: a request, a read
        return key * 2 + int(spin(1) > 0)


def clean(batch):  # a pandas batch in, a pandas batch out
    ids = batch["id"].to_numpy()
    batch["score"] = (ids % 97) * 0.5 + np.sqrt(ids)
    batch["bucket"] = ids % 10
    return batch[batch["score"] > 5.0]


def summarize(batch):  # each batch's sums by bucket
    return batch.groupby("bucket", as_index=False)["score"].sum()


def workload() -> None:
    """The program itself: prints its parts' times as one JSON line."""
    from ray.util import ActorPool  # noqa: PLC0415 -- the program's own imports

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    rng = np.random.default_rng(43)
    sizes = np.exp(rng.uniform(np.log(1), np.log(50), 160)).astype(int).tolist()
    times: dict[str, float] = {}

    began = time.perf_counter()
    first = [simulate.remote(units) for units in sizes[:120]]
    second = [combine.remote(first[i], first[i + 1], units) for i, units in enumerate(sizes[120:])]
    ray.get(second + first)
    times["tasks"] = time.perf_counter() - began

    began = time.perf_counter()
    pool = ActorPool([Scorer.remote(), Scorer.remote()])
    list(pool.map(lambda actor, units: actor.score.remote(units), [5, 10, 15] * 30))
    times["actor pool"] = time.perf_counter() - began

    began = time.perf_counter()
    fetcher = Fetcher.remote()
    ray.get([fetcher.fetch.remote(key) for key in range(240)])
    times["async actor"] = time.perf_counter() - began

    began = time.perf_counter()
    dataset = (
        ray.data.range(400_000, override_num_blocks=40)
        .map_batches(clean, batch_format="pandas")
        .map_batches(summarize, batch_format="pandas")
    )
    sums = dataset.to_pandas().groupby("bucket")["score"].sum()
    assert len(sums) == 10
    times["ray data"] = time.perf_counter() - began

    ray.shutdown()
    print(json.dumps(times))


def _children_cpu() -> float:
    """CPU seconds of this process's children that have ended, and of theirs they waited on."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wait_gone(marker: str, limit: float = 60.0) -> None:
    """Until no process of a run is left (Ray's daemons stop after the driver has gone).

    A run's processes still stopping while the next one works would make whichever variant
    comes next look slower, whatever it is.
    """
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        left = False
        for entry in Path("/proc").iterdir():
            try:
                left = entry.name.isdigit() and marker in (entry / "cmdline").read_text()
            except OSError:
                continue
            if left:
                break
        if not left:
            return
        time.sleep(0.2)


def one_run(
    kit: bool, temp: Path, source: str | None
) -> tuple[dict[str, float], float, float, int]:
    """One run in a new process: its parts' times, wall time, CPU time, the kit's lines.

    The CPU time is the whole process tree's: the driver, Ray's GCS and raylet, and the
    workers they waited on; on a loaded machine it moves far less than wall time.

    ``source``: a ``src`` directory whose raytrace_kit the run imports instead (``--before``).
    """
    session = Path(tempfile.mkdtemp(dir=temp))
    env = {**os.environ, "RAY_TMPDIR": str(session)}
    env.pop("RAY_ADDRESS", None)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    script = [str(HERE), "--workload"]
    command = (
        [sys.executable, "-m", "raytrace_kit", "run", *script] if kit else [sys.executable, *script]
    )
    began, used = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - began, _children_cpu() - used
    _wait_gone(str(session))
    if done.returncode != 0:
        msg = f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        raise RuntimeError(msg)
    times = json.loads(done.stdout.strip().splitlines()[-1])
    lines = sum(path.read_bytes().count(b"\n") for path in session.glob("**/raytrace_kit/*.jsonl"))
    shutil.rmtree(session, ignore_errors=True)
    return times, wall, cpu, lines


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", action="store_true", help="run the program itself")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-rounds", type=int, default=15)
    parser.add_argument(
        "--before", metavar="SRC", help="also run the kit of another tree's src/ (a 'before')"
    )
    args = parser.parse_args()
    if args.workload:
        workload()
        return
    variants = {"plain": False, "plain (2)": False, "kit": True}
    sources = dict.fromkeys(variants)
    if args.before:
        variants["kit (before)"] = True
        sources["kit (before)"] = args.before
    work: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
    walls: dict[str, list[float]] = {label: [] for label in variants}
    cpus: dict[str, list[float]] = {label: [] for label in variants}
    lines: list[int] = []
    labels = list(variants)
    temp = Path(tempfile.mkdtemp(prefix="rk-real-"))
    try:
        for number in range(args.max_rounds):
            # Each round in its own order: a variant that always followed the same one would
            # carry what that one left (page cache, a machine still busy) in its figures.
            order = random.Random(number).sample(labels, len(labels))  # noqa: S311 -- an order
            for label in order:
                times, wall, cpu, written = one_run(variants[label], temp, sources[label])
                work[label].append(times)
                walls[label].append(wall)
                cpus[label].append(cpu)
                if label == "kit":
                    lines.append(written)
            floor = _median_total(work["plain (2)"]) / _median_total(work["plain"])
            print(f"round {number + 1}: noise floor so far {floor:.3f}", file=sys.stderr)
            if number + 1 >= args.rounds and abs(floor - 1) <= 0.01:
                break
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    _report(work, walls, cpus, lines)


def _median_total(runs: list[dict[str, float]]) -> float:
    return statistics.median(sum(run.values()) for run in runs)


def _report(
    work: dict[str, list[dict[str, float]]],
    walls: dict[str, list[float]],
    cpus: dict[str, list[float]],
    lines: list[int],
) -> None:
    rounds = len(work["plain"])
    base = {part: statistics.median(run[part] for run in work["plain"]) for part in PARTS}
    total = _median_total(work["plain"])
    print(f"\nA realistic program, median of {rounds} interleaved rounds (a Ray per run)")
    heads = (*PARTS, "work", "process wall", "process CPU")
    print(f"  {'variant':<14}" + "".join(f"{part:>18}" for part in heads))
    for label, runs in work.items():
        cells = []
        for part in PARTS:
            value = statistics.median(run[part] for run in runs)
            cells.append(f"{value:7.3f}s {value / base[part]:5.3f}x")
        mine = _median_total(runs)
        wall = statistics.median(walls[label])
        cells.append(f"{mine:7.3f}s {mine / total:5.3f}x")
        cells.append(f"{wall:7.2f}s {wall / statistics.median(walls['plain']):5.3f}x")
        cpu = statistics.median(cpus[label])
        cells.append(f"{cpu:7.2f}s {cpu / statistics.median(cpus['plain']):5.3f}x")
        print(f"  {label:<14}" + "".join(f"{cell:>18}" for cell in cells))
    floor = _median_total(work["plain (2)"]) / total
    cpu_floor = statistics.median(cpus["plain (2)"]) / statistics.median(cpus["plain"])
    print(f"  noise floor (plain (2) / plain): work {floor:.3f}x, process CPU {cpu_floor:.3f}x")
    for label, runs in work.items():  # each run, to see the noise for what it is
        totals = " ".join(f"{sum(run.values()):.2f}" for run in runs)
        print(f"  {label:<14} work per run: {totals}")
    print(f"  events the kit wrote per run: {statistics.median(lines):.0f} lines")


if __name__ == "__main__":
    main()
