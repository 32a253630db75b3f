"""Overhead of @debuggable on trivial tasks and actor calls, and of importing raytrace_kit.

Compares, interleaved in one run (A B C A B C ...):
  plain     @ray.remote (twice: the second copy shows the noise floor)
  log=False @debuggable(log=False) over @ray.remote
  log=True  @debuggable over @ray.remote
on N trivial tasks and N actor calls (submitted together, then one ray.get), and prints
the median time per variant and its ratio to plain.

Targets (issues 2, 9, 10): tasks log=True <= 1.05x plain; actor calls log=False <= 1.03x and
log=True <= 1.10x plain; `import raytrace_kit` adds <= 100 ms over `import ray`. Rounds are
added until the two identical plain variants agree within 3% (the printed noise floor), up to
--max-rounds.

Run: python benchmarks/overhead.py [--calls 2000] [--rounds 7] [--max-rounds 42]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import ray
from _harness import actor_calls, arguments, cache_bytecode, interleave_until_stable, print_ratios

from raytrace_kit import debuggable


def trivial(x: int) -> int:
    return x


class Echo:
    def echo(self, x: int) -> int:
        return x


def time_tasks(fn, n: int) -> float:
    start = time.perf_counter()
    ray.get([fn.remote(i) for i in range(n)])
    return time.perf_counter() - start


def import_times(rounds: int) -> dict[str, list[float]]:
    code = {
        "import ray": "import ray",
        "import ray, raytrace_kit": "import ray, raytrace_kit",
    }
    results: dict[str, list[float]] = {k: [] for k in code}
    for _ in range(rounds):
        for label, stmt in code.items():
            script = f"import time; t=time.perf_counter(); {stmt}; print(time.perf_counter()-t)"
            out = subprocess.run(
                [sys.executable, "-c", script],
                capture_output=True,
                text=True,
                check=True,
            )
            results[label].append(float(out.stdout))
    return results


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=2000, rounds=7)
    n = args.calls

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(trivial)
    variants = {
        "plain": remote,
        "plain (2)": ray.remote(trivial),
        "log=False": debuggable(log=False)(remote),
        "log=True": debuggable(remote),
    }
    actor_class = ray.remote(Echo)
    actors = {
        "plain": actor_class.remote(),
        "plain (2)": actor_class.remote(),
        "log=False": debuggable(log=False)(actor_class).remote(),
        "log=True": debuggable(actor_class).remote(),
    }
    # Warm up: workers started, functions exported, actors alive.
    for label, variant in variants.items():
        time_tasks(variant, 200)
        actor_calls(actors[label], 200)

    both = interleave_until_stable(
        {
            **{f"task {k}": (lambda v=v: time_tasks(v, n)) for k, v in variants.items()},
            **{f"actor {k}": (lambda a=a: actor_calls(a, n)) for k, a in actors.items()},
        },
        args.rounds,
        args.max_rounds,
        [("task plain", "task plain (2)"), ("actor plain", "actor plain (2)")],
    )
    tasks = {k: both[f"task {k}"] for k in variants}
    calls = {k: both[f"actor {k}"] for k in actors}
    ray.shutdown()

    print_ratios("Trivial tasks", tasks, n, "plain", "plain (2)", width=10)
    print_ratios("Actor calls", calls, n, "plain", "plain (2)", width=10)

    imports = import_times(args.rounds)
    ray_only = statistics.median(imports["import ray"])
    both = statistics.median(imports["import ray, raytrace_kit"])
    print(f"\nImport time (median of {args.rounds} interleaved fresh interpreters)")
    print(f"  import ray                {ray_only * 1e3:7.1f} ms")
    print(f"  import ray, raytrace_kit  {both * 1e3:7.1f} ms  (+{(both - ray_only) * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
