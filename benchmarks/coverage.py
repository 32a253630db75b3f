"""Cost of ``pytest --ray-cov``: a test that runs 200 tasks, with and without the workers measured.

Each variant is a pytest session of its own (a subprocess, as users run it) in a copy of
the sample package (tests/programs/coverage_sample), whose one test starts Ray
(``ray.init(num_cpus=2)``), warms both workers up, runs 200 tasks of the sample's code and
shuts Ray down. Interleaved rounds in rotating order:
  in-process         pytest --cov=sample --cov-branch             (pytest-cov: the driver only)
  in-process again   the same, measured apart: the noise floor
  ray-cov            pytest --cov=sample --cov-branch --ray-cov   (the workers measured too)

Two figures per session: the 200 tasks inside the test (timed by the test), and the whole
session (interpreter start to report: cluster start, ray.shutdown()'s save, the combine).

Target (issue 24): ray-cov at most 2x in-process, on the test that runs 200 tasks.

Run: python benchmarks/coverage.py [--calls 200] [--rounds 3]
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import arguments, cache_bytecode, interleave, print_ratios

SAMPLE = Path(__file__).parents[1] / "tests" / "programs" / "coverage_sample"

TEST = """
import time

import ray

from sample import work


def test_tasks():
    ray.init(address="local", num_cpus=2)
    try:
        classify = ray.remote(work.classify)
        ray.get([classify.remote(n) for n in range(8)])  # both workers started
        start = time.perf_counter()
        assert len(ray.get([classify.remote(n - {half}) for n in range({calls})])) == {calls}
        print(f"TASKS {{time.perf_counter() - start}}")
    finally:
        ray.shutdown()
"""


def session(project: Path, options: list[str], inside: list[float]) -> float:
    """Seconds of one pytest session; appends the test's own time for its tasks to ``inside``."""
    for stale in project.glob(".coverage*"):
        stale.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_PROCESS")}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", *options],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    line = next(line for line in done.stdout.splitlines() if "TASKS " in line)
    inside.append(float(line.split("TASKS ")[1]))
    return took


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=200, rounds=3)
    with tempfile.TemporaryDirectory(prefix="raytrace_kit-coverage-bench-") as folder:
        project = Path(folder)
        shutil.copytree(SAMPLE / "sample", project / "sample")
        (project / "test_tasks.py").write_text(TEST.format(calls=args.calls, half=args.calls // 2))
        plain = ["--cov=sample", "--cov-branch", "test_tasks.py"]
        variants = {
            "in-process": plain,
            "in-process again": plain,
            "ray-cov": [*plain, "--ray-cov"],
        }
        inside: dict[str, list[float]] = {label: [] for label in variants}

        def timed(label: str) -> float:
            return session(project, variants[label], inside[label])

        runs = {label: functools.partial(timed, label) for label in variants}
        whole = interleave(runs, args.rounds)
    print_ratios(
        "The 200 tasks, timed inside the test", inside, args.calls, "in-process", "in-process again"
    )
    print_ratios("The whole pytest session", whole, args.calls, "in-process", "in-process again")


if __name__ == "__main__":
    main()
