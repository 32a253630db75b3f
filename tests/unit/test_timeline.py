"""timeline()'s slices: each process a lane, calls that overlap in it on rows of their own."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.timeline.trace import _trace

START = 1_750_000_000.0  # any time: the stamps are written from it


def _call(number: int, pid: int, begun: float, took: float, ended: bool) -> Call:
    """A call of ``pid`` from ``begun`` seconds for ``took`` (interrupted: no end)."""

    def stamp(at: float) -> str:
        return datetime.fromtimestamp(START + at, timezone.utc).isoformat(timespec="microseconds")

    return Call(
        call_id=f"{number:016x}",
        function="jobs.step",
        kind="task",
        status="ok" if ended else "interrupted",
        started=stamp(begun),
        ended=stamp(begun + took) if ended else None,
        duration_s=took if ended else None,
        node_id="ab" * 28,
        pid=pid,
    )


calls = st.lists(
    st.tuples(
        st.sampled_from([101, 102]),
        st.integers(0, 200).map(lambda n: n / 100),  # starts on a 10 ms grid: ties happen
        st.integers(1, 100).map(lambda n: n / 100),
        st.sampled_from([True] * 9 + [False]),  # a call in ten never ends: its row is taken
    ),
    max_size=60,
).map(lambda rows: [_call(i, *row) for i, row in enumerate(rows)])


class TestRows:
    """Rows within a lane: overlapping calls apart, and no more rows than calls at once."""

    @given(calls)
    def test_overlapping_calls_get_rows_of_their_own(self, made: list[Call]) -> None:
        """No two slices of one row overlap; a lane has as many rows as calls at once."""
        slices = [e for e in _trace(made) if e["ph"] == "X"]
        by_row: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for event in slices:
            by_row.setdefault((event["pid"], event["tid"]), []).append(
                (event["ts"], event["ts"] + event["dur"])
            )
        for spans in by_row.values():
            spans.sort()
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert start >= end - 1e-3
        for lane in {event["pid"] for event in slices}:
            spans = [(e["ts"], e["ts"] + e["dur"]) for e in slices if e["pid"] == lane]
            most = max(sum(1 for s, e in spans if s <= at < e) for at, _ in spans)
            rows = {e["tid"] for e in slices if e["pid"] == lane}
            assert rows == set(range(1, len(rows) + 1))
            assert len(rows) == most

    def test_a_thousand_calls_at_once_take_a_thousand_rows(self) -> None:
        """An async actor's calls all running together: one row each, then reused."""
        made = [_call(i, 101, 0.0, 1.0, ended=True) for i in range(1000)]
        made += [_call(1000 + i, 101, 2.0, 1.0, ended=True) for i in range(1000)]
        slices = [e for e in _trace(made) if e["ph"] == "X"]
        assert {e["tid"] for e in slices} == set(range(1, 1001))
