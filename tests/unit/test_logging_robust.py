"""Unit tier: get_logger() never raises into user code, and caps what it writes (no Ray)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import raytrace_kit
from raytrace_kit import get_logger
from raytrace_kit._output.encode import VALUE_CHARS


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"name": "loop"}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    ("value", "written"),
    [
        pytest.param(cyclic(), "<unrenderable dict: ValueError>", id="cyclic dict"),
        pytest.param(Unprintable(), "<unrenderable Unprintable: RuntimeError>", id="bad repr"),
        pytest.param(10**5000, "<unrenderable int: ValueError>", id="5000-digit int"),
    ],
)
def test_unrenderable_values_become_placeholders(value: Any, written: str) -> None:
    """The call goes on; the event is written, its other fields intact."""
    get_logger(stage="load").info("odd.value", value=value, rows=3)
    (event,) = [e for e in raytrace_kit.read_events() if e["event"] == "odd.value"]
    assert event["value"] == written
    assert event["rows"] == 3
    assert event["stage"] == "load"


def test_a_huge_value_is_cut_and_says_so() -> None:
    """A 5 MB value writes a line of a few KiB, naming how long the value was."""
    get_logger().info("big.value", value="x" * 5_000_000, rows=1)
    files = list(raytrace_kit.log_dir().glob("events-*.jsonl"))
    (line,) = [raw for f in files for raw in f.read_bytes().splitlines() if b'"big.value"' in raw]
    assert len(line) < 2 * VALUE_CHARS
    event = json.loads(line)
    assert event["value"].startswith("xxxx")  # the string's own characters, no JSON quote
    assert event["value"].endswith(f"... <cut: {5_000_000 - (VALUE_CHARS - 64)} more characters>")
    assert event["rows"] == 1
