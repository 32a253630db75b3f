"""Coverage of the code that runs in Ray's workers, for a script: raytrace_kit.coverage().

Plain coverage.py reports every @ray.remote body as never run: the bodies run in other
processes. Inside ``raytrace_kit.coverage()``, the workers of the cluster the script starts
measure too, save before ``ray.shutdown()`` ends them, and their data is combined with
this process's into one data file, which coverage.py reports as usual.

Run: python examples/coverage_of_remote_code.py   (needs coverage.py; starts a local Ray instance)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import coverage
import ray

import raytrace_kit


@ray.remote
def grade(score: int) -> str:
    if score >= 90:
        return "A"
    if score >= 50:
        return "pass"
    return "fail"


@ray.remote
class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, mark: str) -> dict[str, int]:
        self.counts[mark] = self.counts.get(mark, 0) + 1
        return self.counts


def main() -> None:
    here = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory(prefix="raytrace_kit-example-") as folder:
        data_file = os.path.join(folder, ".coverage")
        # config_file=False: this example's own settings, not the project's it runs in.
        with raytrace_kit.coverage(data_file=data_file, config_file=False):
            ray.init(address="local", num_cpus=2)
            marks = ray.get([grade.remote(score) for score in (95, 60)])
            tally = Tally.remote()
            for mark in marks:
                counts = ray.get(tally.add.remote(mark))
            ray.shutdown()  # inside the block: every worker saves first
        print(f"marks {marks}, tally {counts}\n")

        data = coverage.CoverageData(data_file)
        data.read()
        run = set(data.lines(here) or ())
    # The remote bodies, line by line: each ran in a Ray worker, or nowhere. (This
    # module's own top-level lines ran before the block started: run the script under
    # `coverage run` to count those too.)
    source = Path(here).read_text().splitlines()
    for name in ("grade", "Tally"):
        first = next(
            n for n, text in enumerate(source, 1) if f" {name}(" in text or f" {name}:" in text
        )
        print()
        for number in range(first + 1, len(source) + 1):
            text = source[number - 1]
            if text and not text[0].isspace():
                break  # the next top-level statement
            if text.strip():
                print(f"  {'run ' if number in run else '    '}{number:3} {text}")
    only_in_workers = [n for n in run if 'return "A"' in source[n - 1]]
    never = [n for n, text in enumerate(source, 1) if 'return "fail"' in text]
    assert only_in_workers, "a worker's line is missing"
    assert not set(never) & run, "a line nobody ran is counted"
    print(f'\nline {only_in_workers[0]} (return "A") ran only in a Ray worker: counted')


if __name__ == "__main__":
    main()
