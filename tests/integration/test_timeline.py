"""timeline(): a Chrome trace / Perfetto file of a run's calls, checked as the viewers read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers


@debuggable
@ray.remote
def leaf(x: int) -> int:
    if x < 0:
        raise ValueError("negative")
    return x


@debuggable
@ray.remote
def root(values: list[int]) -> list[str]:
    outcomes = []
    for ref in [leaf.remote(v) for v in values]:
        try:
            outcomes.append(str(ray.get(ref)))
        except ValueError:
            outcomes.append("failed")
    return outcomes


def _load(path: Path) -> list[dict[str, Any]]:
    trace = json.loads(path.read_text())
    events: list[dict[str, Any]] = trace["traceEvents"]
    for event in events:  # what every viewer needs of every event
        assert event["ph"] in {"X", "M", "s", "f"}
        assert isinstance(event["pid"], int)
        if event["ph"] != "M":
            assert isinstance(event["ts"], float | int)
            assert isinstance(event["tid"], int)
    return events


@pytest.mark.usefixtures("ray_session")
def test_calls_slices_failures_and_flows(tmp_path: Path) -> None:
    """One slice per call with its ids; the failure coloured; arrows parent -> children."""
    assert ray.get(root.remote([1, -1, 2])) == ["1", "failed", "2"]
    session = raytrace_kit.open_session()
    mine = [c for c in session.calls() if c.started >= helpers.window_start()]
    path = raytrace_kit.timeline(session, tmp_path / "trace.json")
    events = _load(path)
    slices = {e["args"]["call_id"]: e for e in events if e["ph"] == "X"}
    for call in mine:
        assert call.call_id in slices
    (parent,) = [c for c in mine if c.function.endswith(".root")]
    children = [c for c in mine if c.parent_call_id == parent.call_id]
    assert len(children) == 3
    failed = [slices[c.call_id] for c in children if c.status == "error"]
    assert [(s["name"], s["cname"], s["args"]["error_type"]) for s in failed] == [
        ("leaf", "terrible", "ValueError")
    ]
    # Each child has an arrow from inside its parent's slice to its own start.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    parent_slice = slices[parent.call_id]
    arrived = set()
    for number, end in ends.items():
        start = starts[number]
        child = next(s for s in slices.values() if s["pid"] == end["pid"] and s["ts"] == end["ts"])
        if child["args"].get("parent_call_id") == parent.call_id:
            assert (start["pid"], start["tid"]) == (parent_slice["pid"], parent_slice["tid"])
            assert parent_slice["ts"] <= start["ts"] <= parent_slice["ts"] + parent_slice["dur"]
            arrived.add(child["args"]["call_id"])
    assert arrived == {c.call_id for c in children}
    names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert all(name.startswith("node ") and " · pid " in name for name in names)


def _line(event: str, call_id: str, second: float, **fields: object) -> str:
    stamp = f"2026-01-01T00:00:{second:09.6f}+00:00"
    record = {"timestamp": stamp, "level": "info", "event": event, "call_id": call_id,
              "function": "m.A.work", "kind": "actor_method", "node_id": "ab" * 28, "pid": 7,
              **fields}  # fmt: skip
    return json.dumps(record, separators=(",", ":")) + "\n"


def test_overlapping_calls_get_rows_and_interrupted_ones_run_to_the_end(tmp_path: Path) -> None:
    """A threaded actor's overlapping calls take two rows of one lane.

    A call cut off by a crash lasts until the last record.
    """
    (tmp_path / "events-ab-7.jsonl").write_text(
        _line("call.start", "a", 0)
        + _line("call.start", "b", 1)
        + _line("call.end", "a", 2, status="ok", duration_s=2.0)
        + _line("call.start", "c", 3)
        + _line("call.end", "b", 4, status="ok", duration_s=3.0)
    )
    events = _load(raytrace_kit.timeline(tmp_path, tmp_path / "t.json"))
    slices = {e["args"]["call_id"]: e for e in events if e["ph"] == "X"}
    assert len({s["pid"] for s in slices.values()}) == 1  # one process
    assert slices["a"]["tid"] != slices["b"]["tid"]  # they overlap: two rows
    assert slices["c"]["tid"] == slices["a"]["tid"]  # a's row is free again at 3 s
    assert slices["c"]["cname"] == "bad"
    assert slices["c"]["args"]["status"] == "interrupted"
    assert slices["c"]["ts"] + slices["c"]["dur"] == pytest.approx(slices["b"]["ts"] + 3e6)
