"""Where an actor call's cost goes: CPU time per call in each process, kit on and off.

``overhead.py`` times actor calls by the wall clock; on a 2-core machine that is the CPU
of every process involved (the driver, the actor's worker, the raylet, the GCS) shared
over two cores. This splits it: for N actor calls submitted together and then got, the
CPU time (user + system, from ``/proc/<pid>/stat``) each process used, per call, for
  plain        @ray.remote (twice: the second copy is the noise floor)
  log=False    @debuggable(log=False)
  log=True     @debuggable
each variant's actor created once, rounds interleaved in rotating order, medians printed.

Run: python benchmarks/actor_cpu.py [--calls 4000] [--rounds 7]
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import ray
from _harness import arguments, cache_bytecode

import raytrace_kit

TICK = os.sysconf("SC_CLK_TCK")


class Echo:
    def echo(self, x: int) -> int:
        return x

    def pid(self) -> int:
        return os.getpid()


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def ray_pids() -> dict[str, int]:
    """The raylet's and the GCS server's pids (this machine's, by command name)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name in ("raylet", "gcs_server") and name not in found:
            found[name] = int(entry.name)
    return found


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=4000, rounds=7)
    n = args.calls
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    try:
        actors = {
            "plain": ray.remote(Echo).remote(),
            "plain (2)": ray.remote(Echo).remote(),
            "log=False": raytrace_kit.debuggable(log=False)(ray.remote(Echo)).remote(),
            "log=True": raytrace_kit.debuggable(ray.remote(Echo)).remote(),
        }
        workers = {name: ray.get(actor.pid.remote()) for name, actor in actors.items()}
        others = ray_pids()
        rows: dict[str, dict[str, list[float]]] = {name: {} for name in actors}
        for _ in range(2):  # warm-up
            for actor in actors.values():
                ray.get([actor.echo.remote(i) for i in range(200)])
        for round_index in range(args.rounds):
            names = list(actors)
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:  # rotating order
                actor = actors[name]
                pids = {"driver": os.getpid(), "worker": workers[name], **others}
                before = {k: cpu_s(p) for k, p in pids.items()}
                ray.get([actor.echo.remote(i) for i in range(n)])
                after = {k: cpu_s(p) for k, p in pids.items()}
                for k in pids:
                    rows[name].setdefault(k, []).append((after[k] - before[k]) / n * 1e6)
        parts = list(rows["plain"])
        print(f"\nCPU per actor call, us (median of {args.rounds} interleaved rounds, {n} calls)")
        print("  " + f"{'':<11}" + "".join(f"{k:>12}" for k in [*parts, "all"]))
        for name, by_part in rows.items():
            medians = [statistics.median(by_part[k]) for k in parts]
            cells = "".join(f"{m:12.1f}" for m in [*medians, sum(medians)])
            print(f"  {name:<11}{cells}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
