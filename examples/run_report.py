"""A report of a run: what failed and where, what died, where the time went, and what to fix.

A small pipeline submits tiny tasks, waits on its calls one at a time, and one record
fails to parse; one shard takes ten times as long as the others (a straggler); a decoder
crashes in native code and takes its worker down. explain() says what each error means:
the failing call's traceback, and for the dead worker, why it died (Ray's own record of
it), also from the error's text as a program logs it. report() names each problem with
its evidence and a fix; save_html() writes the same as one page, with pictures of the
run: calls over time per process, memory over time, and how long each function's calls
took.

Run: python examples/run_report.py [REPORT.html]   (starts its own local Ray)
"""

from __future__ import annotations

import ctypes
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.exceptions import WorkerCrashedError

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
@ray.remote(max_retries=0)
def decode(blob: bytes) -> int:
    return len(ctypes.string_at(0))  # a bug in native code: reads address 0, SIGSEGV


@debuggable(log_args=True)  # the straggler finding then shows its arguments
@ray.remote
def load_shard(shard: int, seconds: float) -> int:
    time.sleep(seconds)  # stands for reading a shard; one of them is far bigger
    return shard


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
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print(ray.get(pipeline.remote(rows))[-3:])
        shards = [load_shard.remote(i, 2.0 if i == 5 else 0.1) for i in range(8)]
        print("shards:", ray.get(shards))
        try:
            ray.get(parse.remote(" n/a "))
        except ValueError as error:  # what it means, with the failing call's traceback
            explained = raytrace_kit.explain(error)
            print(explained, "\n")
            assert explained.call is not None
        try:
            ray.get(decode.remote(b"\x00"))
        except WorkerCrashedError as error:  # Ray's error says only that the worker died
            deadline = time.monotonic() + 15  # Ray records the death a moment after
            while "Ray's records" not in str(explained := raytrace_kit.explain(error)):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            print(explained, "\n")
            assert "SIGSEGV" in explained.what, explained
            logged = f"ERROR decode failed: {error}"  # as a program logs it: no class name
            assert raytrace_kit.explain(logged).kind == explained.kind
        made = raytrace_kit.report()  # this session's records
    finally:
        ray.shutdown()
    print(made)
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "report.html"
    page = made.save_html(out).read_text(encoding="utf-8")
    print(f"the same as one page, with pictures: {out}")
    for picture in ("task-stream", "memory", "spread"):
        assert f'class="raytrace-kit-chart {picture}"' in page, picture
    titles = [finding.title for finding in made.findings]
    assert any(title.startswith("Tasks too small") for title in titles), titles
    assert any("one at a time" in title for title in titles), titles
    assert made.failures[0]["function"].endswith(".parse")
    assert any(title == "Native crashes during calls" for title in titles), titles
    (straggler,) = [f for f in made.findings if f.kind == "straggler"]
    assert straggler.subject.endswith(".load_shard"), straggler
    assert "arguments ['5', '2.0']" in straggler.evidence, straggler


if __name__ == "__main__":
    main()
