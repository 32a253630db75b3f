"""A report of a run: what failed and where, what died, where the time went, and what to fix.

A small pipeline submits tiny tasks, waits on its calls one at a time, and one record
fails to parse. explain() says what that error means and shows the failing call;
report() names each problem with its evidence and a fix; save_html() writes the same as
one page.

Run: python examples/run_report.py [REPORT.html]   (starts its own local Ray)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote
def clean(value: str) -> str:
    return value.strip()


@debuggable
@ray.remote
def parse(value: str) -> int:
    return int(value)


@debuggable
@ray.remote
def pipeline(rows: list[str]) -> list[int]:
    cleaned = [ray.get(clean.remote(row)) for row in rows]  # one at a time: a finding
    parsed = []
    for value in cleaned:
        try:
            parsed.append(ray.get(parse.remote(value)))
        except ValueError:
            parsed.append(-1)
    return parsed


def main() -> None:
    rows = [f" {i} " for i in range(24)] + [" n/a "]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print(ray.get(pipeline.remote(rows))[-3:])
        try:
            ray.get(parse.remote(" n/a "))
        except ValueError as error:  # what it means, with the failing call's traceback
            explained = raytrace_kit.explain(error)
            print(explained, "\n")
            assert explained.call is not None
        made = raytrace_kit.report()  # this session's records
    finally:
        ray.shutdown()
    print(made)
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "report.html"
    print(f"the same as one page: {made.save_html(out)}")
    titles = [finding.title for finding in made.findings]
    assert any(title.startswith("Tasks too small") for title in titles), titles
    assert any("one at a time" in title for title in titles), titles
    assert made.failures[0]["function"].endswith(".parse")


if __name__ == "__main__":
    main()
