"""Unit: the held turns of event loops, summed per method, merged, and judged."""

from __future__ import annotations

import json

import pytest

from raytrace_kit._reports.run import BlockedLoops, each


def _line(function: str, held_s: float, line: int = 9, actor: str = "a1") -> bytes:
    """A ``call.blocked`` as the worker writes it (the members the report reads)."""
    stack = [["/app/fetch.py", line, "fetch", "time.sleep(0.3)"]]
    event = {
        "timestamp": "2026-12-01T10:00:00.000001+00:00", "level": "warning",
        "event": "call.blocked", "schema": 2, "call_id": "c1", "function": function,
        "kind": "actor_method", "actor_id": actor, "held_s": held_s,
        "where": f"/app/fetch.py:{line}", "thread": "AsyncIO Thread: default", "stack": stack,
    }  # fmt: skip
    return json.dumps(event, separators=(",", ":")).encode()


class TestBlockedLoops:
    """Held turns: summed per method, the longest's line kept, judged by the evidence."""

    def test_sums_turns_and_keeps_the_longest_line(self) -> None:
        """Three turns of one method: their count and sum; the longest turn's line."""
        blocked = BlockedLoops()
        for held, line in ((0.3, 9), (0.5, 12), (0.2, 9)):
            blocked.line(_line("app.Fetcher.fetch", held, line))
        (row,) = blocked.rows()
        assert (row["turns"], row["held_s"], row["longest_s"]) == (3, 1.0, 0.5)
        assert row["where"] == "/app/fetch.py:12"
        assert row["source"] == "time.sleep(0.3)"

    def test_other_lines_are_not_taken(self) -> None:
        """A call.submit or call.stuck line passed to it is left alone."""
        blocked = BlockedLoops()
        blocked.line(_line("f", 0.3).replace(b"call.blocked", b"call.stuck"))
        blocked.line(b'{"event":"call.submit","function":"f"}')
        assert blocked.rows() == []

    @pytest.mark.parametrize(
        ("turns", "expected"),
        [
            ([0.3, 0.3], ["blocked_loop"]),  # 0.6 s over two turns: the loop was held
            ([0.2, 0.2], []),  # 0.4 s in all: under the evidence needed
            ([0.4], []),  # one turn under 1 s: a first call's imports look like this
            ([1.5], ["blocked_loop"]),  # one long turn: enough on its own
        ],
    )
    def test_the_finding_needs_its_evidence(self, turns: list[float], expected: list[str]) -> None:
        """Enough held time over two turns, or one long turn; silent below."""
        blocked = BlockedLoops()
        for held in turns:
            blocked.line(_line("app.Fetcher.fetch", held))
        assert [f.kind for f in blocked.findings()] == expected

    def test_merged_as_one(self) -> None:
        """Two nodes' parts merge into what one pass over both would have found."""
        one, two, both = BlockedLoops(), BlockedLoops(), BlockedLoops()
        for taker, held, actor in ((one, 0.3, "a1"), (two, 0.7, "a2")):
            taker.line(_line("app.Fetcher.fetch", held, actor=actor))
            both.line(_line("app.Fetcher.fetch", held, actor=actor))
        merged = BlockedLoops.merged([one.to_dict(), two.to_dict()])
        assert merged.rows() == both.rows()
        assert merged.rows()[0]["actors"] == 2

    def test_each_hands_every_line_to_every_taker(self) -> None:
        """each(): one callback for iter_calls, every taker sees every line."""
        seen: list[tuple[str, bytes]] = []
        take = each(lambda raw: seen.append(("a", raw)), lambda raw: seen.append(("b", raw)))
        take(b"x")
        assert seen == [("a", b"x"), ("b", b"x")]
