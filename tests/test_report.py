"""report(): a real run's failures, deaths, time and findings, named where the user looks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import ray
from ray.exceptions import WorkerCrashedError

import raytrace_kit
from raytrace_kit import debuggable

from . import conftest


@debuggable
@ray.remote
def tiny(x: int) -> int:
    return x + 1


@debuggable
@ray.remote
def step(x: int) -> int:
    return x


@debuggable
@ray.remote
def one_by_one(n: int) -> int:
    return sum(ray.get(step.remote(i)) for i in range(n))  # the ray.get-in-a-loop pattern


@debuggable
@ray.remote
def parse_record(text: str) -> int:
    return int(text)


@debuggable
@ray.remote(max_retries=0)
def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@debuggable
@ray.remote
def flaky(counter: str) -> str:
    path = Path(counter)
    seen = int(path.read_text()) if path.exists() else 0
    path.write_text(str(seen + 1))
    if seen == 0:
        raise ConnectionError("first attempt fails")
    return "ok"


@debuggable
@ray.remote
class Hoarder:
    """Keeps what each call makes: the leak signature."""

    def __init__(self) -> None:
        self.kept: list[bytearray] = []

    def add(self, mib: int) -> int:
        block = bytearray(mib * 2**20)
        block[::4096] = b"x" * len(block[::4096])  # touch the pages: RSS grows
        self.kept.append(block)
        return len(self.kept)


@pytest.mark.usefixtures("ray_session")
def test_leak_signature_and_merged_timeline(tmp_path: Path) -> None:
    """An actor whose memory grows call after call is named; timeline() merges Ray's events."""
    hoarder = Hoarder.remote()
    for _ in range(6):
        ray.get(hoarder.add.remote(16))
    made = raytrace_kit.report()
    # The session holds other tests' calls too: this leak is the one naming Hoarder.add.
    leaks = [f for f in made.findings if f.title.startswith("Memory grows call after call")]
    (leak,) = [f for f in leaks if ".Hoarder.add" in f.evidence]
    assert "profile_scope='actor'" in leak.fix
    trace = json.loads(raytrace_kit.timeline(None, tmp_path / "t.json", merge_ray=True).read_text())
    ours = [e for e in trace["traceEvents"] if e.get("args", {}).get("call_id")]
    rays = [e for e in trace["traceEvents"] if not e.get("args", {}).get("call_id")]
    assert ours
    # Ray's own slices of the same calls (named by method) and of its task phases.
    assert any(e.get("ph") == "X" and e.get("name") == "add" for e in rays)
    assert any(str(e.get("name")).startswith("task:") for e in rays)


@pytest.mark.usefixtures("ray_session")
def test_report_names_failures_deaths_and_findings(tmp_path: Path) -> None:
    ray.get([tiny.remote(i) for i in range(30)])
    assert ray.get(one_by_one.remote(6)) == 15
    with pytest.raises(ValueError, match="invalid literal"):
        ray.get(parse_record.remote("x7"))
    with pytest.raises(WorkerCrashedError):
        ray.get(crash.remote())
    options = {"max_retries": 2, "retry_exceptions": [ConnectionError]}
    assert ray.get(flaky.options(**options).remote(str(tmp_path / "n"))) == "ok"

    # Only this test's calls: a session of the files, filtered by time, as a user would.
    session = raytrace_kit.open_session()
    calls = [c for c in session.calls() if c.started >= conftest._test_started]
    assert calls
    made = raytrace_kit.report(session)

    failure = next(f for f in made.failures if f["function"].endswith(".parse_record"))
    assert failure["error_type"] == "ValueError"
    assert "    return int(text)" in failure["traceback"]
    assert any(i["function"].endswith(".crash") for i in made.interrupted)
    titles = [f.title for f in made.findings]
    assert any(t.startswith("Tasks too small") and t.endswith(".tiny") for t in titles)
    assert any("one at a time" in t and t.endswith(".one_by_one") for t in titles)
    assert any(
        t.startswith("Retries hide a flaky function") and t.endswith(".flaky") for t in titles
    )
    assert "Processes died during calls" in titles

    text = str(made)
    assert "Findings" in text
    assert "return int(text)" in text
    assert "refs = [f.remote(x) for x in xs]" in text  # fixes print as written
    json.dumps(made.to_dict())  # machine-readable as is
    page = made.save_html(tmp_path / "report.html")
    assert "parse_record" in page.read_text()

    shown = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "report", str(session.root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["overview"]["calls"] >= len(calls)
