"""The refs-hold-the-store grouping and finding, from held tables and store.held lines."""

from __future__ import annotations

import json
from pathlib import Path

from raytrace_kit._reports.run import Group, HeldView, group, held_findings, sites_of

TASK = "ab" * 24
MIB = 2**20


def _line(held: int, capacity: int, spilled: int, groups: list[Group]) -> bytes:
    fields = {"event": "store.held", "held_bytes": held, "capacity_bytes": capacity,
              "spilled_bytes": spilled, "groups": [g.__dict__ for g in groups]}  # fmt: skip
    return json.dumps(fields).encode()


class TestGroup:
    """Held rows are grouped by line, function and what keeps them."""

    def test_tasks_joined_to_their_lines_and_puts_by_their_own(self) -> None:
        """A task's rows take its submission's line; a put's row keeps its own line."""
        rows = [
            {"task_id": TASK, "site": None, "type": "local ref", "count": 2, "bytes": 20},
            {"task_id": None, "site": "a.py:3", "type": "local ref", "count": 1, "bytes": 5},
        ]
        made = group([{"rows": rows}], {TASK: ("a.py:9", "app.f")})
        assert made == [
            Group("a.py:9", "app.f", "local ref", 2, 20),
            Group("a.py:3", "ray.put", "local ref", 1, 5),
        ]

    def test_sites_read_from_submit_lines(self, tmp_path: Path) -> None:
        """Only the asked tasks' lines are read back."""
        file = tmp_path / "events-x-1.jsonl"
        submit = {"event": "call.submit", "task_id": TASK, "site": "a.py:9", "function": "app.f"}
        file.write_text(json.dumps(submit, separators=(",", ":")) + "\n")
        assert sites_of([file], {TASK}) == {TASK: ("a.py:9", "app.f")}
        assert sites_of([file], {"cd" * 24}) == {}


class TestFinding:
    """The finding needs a full or spilling store and a line holding a real share."""

    def test_full_store_names_the_line(self) -> None:
        """95% of the store held at one line: named, with its bytes and the fix."""
        held = [
            _line(95 * MIB, 100 * MIB, 0, [Group("a.py:9", "app.f", "local ref", 19, 95 * MIB)])
        ]
        (made,) = held_findings(held)
        assert made.kind == "refs_hold_store"
        assert "a.py:9" in made.title
        assert "95 MiB" in made.title
        assert "ray.wait" in made.fix

    def test_half_full_and_nothing_spilled_is_silent(self) -> None:
        """Refs holding half the store are a program's working set, not a finding."""
        held = [
            _line(50 * MIB, 100 * MIB, 0, [Group("a.py:9", "app.f", "local ref", 10, 50 * MIB)])
        ]
        assert held_findings(held) == []

    def test_put_gets_the_put_fix(self) -> None:
        """Objects of a ray.put line are told to be put once."""
        held = [
            _line(
                10 * MIB, 100 * MIB, 5 * MIB, [Group("a.py:3", "ray.put", "local ref", 9, 10 * MIB)]
            )
        ]
        (made,) = held_findings(held)
        assert "`ray.put` a value once" in made.fix

    def test_view_text_names_lines(self) -> None:
        """The live view's text has the line, the function and the bytes."""
        view = HeldView(
            "cluster x",
            100 * MIB,
            90 * MIB,
            [Group("/x/a.py:9", "app.f", "local ref", 2, 20 * MIB)],
            1,
        )
        shown = str(view)
        assert "/x/a.py:9" in shown
        assert "app.f" in shown
        assert "20 MiB" in shown
