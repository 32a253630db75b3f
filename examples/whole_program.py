"""One unedited program run two ways: ``python`` and ``raytrace-kit run``.

``examples/unedited/`` is a pipeline of plain ``@ray.remote`` stages. Run with ``python``
it prints its result and leaves no records; run with ``raytrace-kit run`` it prints the
same, and every stage's calls are recorded, with the driver's own record: the report then
names the ``ray.get`` in a loop by its line, and the straggler the driver waited on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import raytrace_kit

PROGRAM = Path(__file__).parent / "unedited"


def run(*command: str) -> str:
    done = subprocess.run(  # noqa: S603 -- this interpreter, our own arguments
        [sys.executable, *command], cwd=PROGRAM, capture_output=True, text=True, check=True
    )
    return done.stdout


plain = run("pipeline.py")
before = {summary.path for summary in raytrace_kit.sessions()}
instrumented = run("-m", "raytrace_kit", "run", "--log-args", "pipeline.py")
(session,) = {summary.path for summary in raytrace_kit.sessions()} - before  # the run's own
print("python pipeline.py               ->", plain.strip())
print("raytrace-kit run pipeline.py     ->", instrumented.strip())
assert plain == instrumented, "the program's output is its own, instrumented or not"

made = raytrace_kit.report(session)
print(f"\nrecorded: {made.overview['calls']} calls of {made.overview['functions']} functions")
for finding in made.findings:
    if finding.kind in {"driver_loop", "driver_straggler"}:
        print(f"- {finding.title}\n  {finding.evidence}\n  Fix: {finding.fix}")
kinds = {finding.kind for finding in made.findings}
assert {"driver_loop", "driver_straggler"} <= kinds, kinds
