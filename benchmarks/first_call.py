"""A Ray worker's first instrumented call: the kit's modules it imports, and their CPU.

Issue 43. Each Ray worker pays, once, for what its first instrumented call imports of the
kit: Ray unpickles the instrumented function (which imports the worker-side modules it
names), then the boundary runs the call. Each measurement here is a fresh process that
does just that, with Ray imported first as in a worker: it unpickles an instrumented task
(``square``, pickled by the same tree) and calls it once, and reports the main thread's
CPU time for both steps (``time.thread_time()``: the kit's thread, started at the first
call, is not counted) and how many ``raytrace_kit`` modules are then loaded. Printed:
each variant's median and fastest run (on a loaded machine the fastest is the least
disturbed: other jobs only ever add to a CPU time), their ratios to the base (``before``,
else ``after``), and both noise floors.

Variants, in interleaved rounds in rotating order (A B C, B C A, ...):
  after       this tree's kit (twice: the noise floor)
  before      with --before REF: the kit of a git ref of this repository (or of a src/
              directory), checked out into a temporary directory

Every process keeps its bytecode (see ``_harness.cache_bytecode``): where
PYTHONDONTWRITEBYTECODE is set, each fresh process would compile the kit again (about
75 ms) and swamp the figure. Each variant runs once before the rounds, to fill the cache.

Run: python benchmarks/first_call.py [--before 3afaa71] [--rounds 21] [--modules]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import cache_bytecode, floor, interleave, source_of

HERE = Path(__file__).resolve()
SOURCE = HERE.parents[1] / "src"

_MAKE = """
import sys
import ray.cloudpickle
from raytrace_kit._options import DebugOptions
from raytrace_kit._worker.instrument import instrument_function


def square(x):
    return x * x


ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
with open(sys.argv[1], "wb") as out:
    out.write(ray.cloudpickle.dumps(instrument_function(square, DebugOptions())))
"""

_FIRST_CALL = """
import json, sys, time
import ray, ray.cloudpickle  # a worker has Ray imported before it runs anything

with open(sys.argv[1], "rb") as source:
    pickled = source.read()
began = time.thread_time()
task = ray.cloudpickle.loads(pickled)
loaded = time.thread_time()
assert task(7) == 49
ended = time.thread_time()
kit = sorted(name for name in sys.modules if name.split(".")[0] == "raytrace_kit")
print(json.dumps({
    "load": loaded - began, "call": ended - loaded, "modules": kit,
    "file": sys.modules["raytrace_kit"].__file__,
}))
"""


class Variant:
    """One tree's kit: its pickled task, and a fresh process per measurement."""

    def __init__(self, source: Path, temp: Path, name: str) -> None:
        self.source = source
        self.env = dict(os.environ)
        cache_bytecode(self.env)
        self.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(source), os.environ.get("PYTHONPATH")])
        )
        self.env["RAYTRACE_LOG_DIR"] = str(temp / f"logs-{name}")
        self.env.pop("RAY_ADDRESS", None)
        self.pickled = temp / f"{name}.pkl"
        subprocess.run([sys.executable, "-c", _MAKE, str(self.pickled)], env=self.env, check=True)
        self.modules: list[str] = []
        self.loads: list[float] = []
        self.calls: list[float] = []

    def __call__(self) -> float:
        """One fresh process: the seconds of thread CPU of the load and the first call."""
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_CALL, str(self.pickled)],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if not result["file"].startswith(str(self.source)):
            msg = f"imported {result['file']}, not the kit of {self.source}"
            raise RuntimeError(msg)
        self.modules = result["modules"]
        self.loads.append(result["load"])
        self.calls.append(result["call"])
        return result["load"] + result["call"]


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", metavar="REF", help="a git ref (or a src/ directory) to compare"
    )
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--modules", action="store_true", help="list the modules each imports")
    args = parser.parse_args()
    temp = Path(tempfile.mkdtemp(prefix="rk-first-call-"))
    try:
        variants = {
            "after": Variant(SOURCE, temp, "after"),
            "after (2)": Variant(SOURCE, temp, "after2"),
        }
        if args.before:
            variants["before"] = Variant(source_of(args.before, temp), temp, "before")
        for variant in variants.values():  # bytecode cached, page cache warm
            variant()
            variant.loads.clear()
            variant.calls.clear()
        samples = interleave(dict(variants), args.rounds)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    _report(variants, samples, args.modules)


def _report(variants: dict[str, Variant], samples: dict[str, list[float]], modules: bool) -> None:
    """Medians, and the fastest of each (on a loaded machine, the least disturbed run)."""
    base = "before" if "before" in variants else "after"
    reference = statistics.median(samples[base])
    fastest = min(samples[base])
    rounds = len(samples["after"])
    print(f"\nA worker's first instrumented call, thread CPU ({rounds} interleaved rounds)")
    print(
        f"  {'variant':<10} {'unpickle':>9} {'call':>8} {'median':>9} {'ratio':>7}"
        f" {'fastest':>9} {'ratio':>7} {'modules':>8}"
    )
    for label, variant in variants.items():
        total, best = statistics.median(samples[label]), min(samples[label])
        print(
            f"  {label:<10} {statistics.median(variant.loads) * 1e3:6.1f} ms"
            f" {statistics.median(variant.calls) * 1e3:5.1f} ms {total * 1e3:6.1f} ms"
            f" {total / reference:6.3f}x {best * 1e3:6.1f} ms {best / fastest:6.3f}x"
            f" {len(variant.modules):8d}"
        )
    best_floor = min(samples["after (2)"]) / min(samples["after"])
    print(
        f"  noise floor (after (2) / after): median {floor(samples, 'after', 'after (2)'):5.3f}x,"
        f" fastest {best_floor:5.3f}x"
    )
    if "before" in variants:
        gone = sorted(set(variants["before"].modules) - set(variants["after"].modules))
        new = sorted(set(variants["after"].modules) - set(variants["before"].modules))
        print(f"  no longer imported at the first call: {', '.join(gone) or '-'}")
        print(f"  newly imported: {', '.join(new) or '-'}")
    if modules:
        for label, variant in variants.items():
            print(f"\n{label}:\n  " + "\n  ".join(variant.modules))


if __name__ == "__main__":
    main()
