"""Unit tier: submissions joined as columns read times as the rest of the report does."""

from __future__ import annotations

import math
from array import array
from datetime import datetime, timedelta, timezone

import numpy
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._reports.cluster import from_micros, micros
from raytrace_kit._reports.reading import (
    Clock,
    Stamps,
    column_loops,
    first_rows,
    grouped,
    looked_up,
    read_stamp,
    reduced,
)
from raytrace_kit._reports.run import loops_of

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

_STAMPS = st.lists(
    st.tuples(st.integers(0, 400 * 86_400 * 10**6), st.booleans()).map(
        lambda pair: (T0 + timedelta(microseconds=pair[0])).isoformat(
            timespec="microseconds" if pair[1] else "seconds"
        )
    ),
    max_size=40,
)


class TestStamps:
    """Stamps read at once are the very floats Clock reads one at a time."""

    @given(_STAMPS)
    def test_same_floats_as_clock(self, stamps: list[str]) -> None:
        kept = Stamps()
        assert all(kept.add(stamp) for stamp in stamps)
        assert kept.seconds(numpy).tolist() == [Clock()(stamp) for stamp in stamps]

    def test_other_shapes_read_alike_and_no_time_kept_out(self) -> None:
        """Milliseconds, Z, a space, other offsets: the digits as UTC, as Clock reads them.

        A digit of another script ends the fraction; a stamp that is no time is not kept:
        the caller leaves its record out, as it does a line cut short.
        """
        kept, base = Stamps(), Clock()("2026-01-01T00:00:01.000000+00:00")
        shapes = [
            "2026-01-01T00:00:01.250+00:00",
            "2026-01-01T00:00:01.25000Z",
            "2026-01-01 00:00:01.250000+00:00",
            "2026-01-01T00:00:01.250000+05:00",  # the kit writes UTC: no offset applied
            "2026-01-01T00:00:01.2500001+00:00",
            "2026-01-01T00:00:01.25000\u0661+00:00",  # an Arabic-Indic one after 25000
        ]
        assert all(kept.add(stamp) for stamp in shapes)
        assert [round(v - base, 6) for v in kept.seconds(numpy).tolist()] == [0.25] * 6
        assert not kept.add("yesterday")
        assert len(kept.seconds(numpy)) == 6
        # The kit's shape with a letter in it: kept, and read as no time (NaN), the rest as
        # before (numpy refuses the whole column: each row is read alone then).
        assert kept.add("2026-01-01T00:00:0x.250000+00:00")
        values = kept.seconds(numpy)
        assert [round(v - base, 6) for v in values[:6].tolist()] == [0.25] * 6
        assert numpy.isnan(values[6])

    def test_clock_and_micros_read_other_shapes_as_the_columns_do(self) -> None:
        """Milliseconds then Z or an offset, no offset, nine digits: one reading everywhere.

        The cluster report's microseconds and the actor tables' Clock read the fraction's
        digits (they took six characters: ``.123Z`` raised ``ValueError``, ``.123`` read
        as 123 microseconds).
        """
        shapes = [
            "2026-01-01T00:00:01.250Z",
            "2026-01-01T00:00:01.250+00:00",
            "2026-01-01T00:00:01.25",
            "2026-01-01T00:00:01.250000123+00:00",
            "2026-01-01T00:00:01.250000+00:00",
        ]
        base = Clock()("2026-01-01T00:00:01+00:00")
        for stamp in shapes:
            assert round(Clock()(stamp) - base, 6) == 0.25, stamp
            assert Clock()(stamp) == read_stamp(stamp), stamp
            assert from_micros(micros(stamp)) == Clock()(stamp), stamp


def _joined(keys: numpy.ndarray, side: array[int], stamps: Stamps, *, last: bool) -> numpy.ndarray:
    found, (values,) = reduced(
        numpy, numpy.frombuffer(side, dtype=numpy.int64), [stamps.seconds(numpy)], last=last
    )
    return looked_up(numpy, keys, found, values)


_SIDE = st.lists(
    st.tuples(st.integers(0, 6), st.one_of(st.just(float("nan")), st.integers(0, 9).map(float))),
    max_size=30,
)


class TestJoined:
    """Each task's first start read, or latest end, from the other side; NaN where none."""

    def test_first_read_and_latest(self) -> None:
        clock, stamps = Clock(), Stamps()
        side = array("q", [7, 5, 7, 9])  # task 7 twice: read at 2 s, then at 3 s
        for second in (2, 1, 3, 4):
            stamps.add(f"2026-01-01T00:00:0{second}.000000+00:00")
        keys = numpy.array([5, 7, 8], dtype=numpy.int64)  # 8: never on the other side
        base = clock("2026-01-01T00:00:00.000000+00:00")
        first = _joined(keys, side, stamps, last=False)
        latest = _joined(keys, side, stamps, last=True)
        assert ((first[:2] - base).tolist(), (latest[:2] - base).tolist()) == (
            [1.0, 2.0],
            [1.0, 3.0],
        )
        assert numpy.isnan(first[2])
        assert numpy.isnan(latest[2])
        assert numpy.isnan(_joined(keys, array("q"), Stamps(), last=True)).all()

    @given(_SIDE, _SIDE, st.booleans())
    def test_two_shares_reduced_apart_reduce_to_all_read_at_once(
        self, one: list[tuple[int, float]], two: list[tuple[int, float]], last: bool
    ) -> None:
        """What two readers reduce, reduced again, is what one reader of both reduces."""

        def columns(rows: list[tuple[int, float]]) -> tuple[numpy.ndarray, numpy.ndarray]:
            keys = numpy.array([k for k, _ in rows], dtype=numpy.int64)
            return keys, numpy.array([v for _, v in rows], dtype=numpy.float64)

        keys, values = columns(one + two)
        whole, (expected,) = reduced(numpy, keys, [values], last=last)
        parts = [
            reduced(numpy, *columns(rows)[:1], [columns(rows)[1]], last=last) for rows in (one, two)
        ]
        again, (got,) = reduced(
            numpy,
            numpy.concatenate([p[0] for p in parts]),
            [numpy.concatenate([p[1][0] for p in parts])],
            last=last,
        )
        assert again.tolist() == whole.tolist()
        assert numpy.array_equal(got, expected, equal_nan=True)
        # The reference: each key's first value read, or its latest (NaN if any was NaN).
        for key, value in zip(whole.tolist(), expected.tolist(), strict=True):
            mine = [v for k, v in one + two if k == key]
            nan = any(math.isnan(v) for v in mine)
            want = (float("nan") if nan else max(mine)) if last else mine[0]
            assert numpy.array_equal(value, want, equal_nan=True)

    @given(st.lists(st.integers(0, 5), max_size=30), st.lists(st.integers(0, 5), max_size=30))
    def test_first_rows_of_shares_then_again_are_the_first_rows(
        self, one: list[int], two: list[int]
    ) -> None:
        """Each key's first row, in reading order, whether found per share first or not."""
        whole = numpy.array(one + two, dtype=numpy.int64)
        parts = [numpy.array(rows, dtype=numpy.int64) for rows in (one, two)]
        kept = numpy.concatenate([part[first_rows(numpy, part)] for part in parts])
        expected = list(dict.fromkeys(one + two))
        assert whole[first_rows(numpy, whole)].tolist() == expected
        assert kept[first_rows(numpy, kept)].tolist() == expected


class TestLoops:
    """The driver's lines judged from columns as loops_of judges them from lists."""

    @given(
        st.lists(
            st.tuples(
                st.integers(0, 2),
                st.integers(0, 30),
                st.one_of(st.none(), st.integers(0, 35)),
            ),
            max_size=60,
        )
    )
    def test_as_loops_of(self, calls: list[tuple[int, int, int | None]]) -> None:
        names = ["a.py:1", "b.py:2", "c.py:3"]
        lists: dict[str, list[tuple[float, float | None]]] = {}
        for site, when, end in calls:
            lists.setdefault(names[site], []).append(
                (float(when), None if end is None else float(end))
            )
        columns = column_loops(
            numpy,
            numpy.array([c[0] for c in calls], dtype=numpy.int64),
            numpy.array([float(c[1]) for c in calls]),
            numpy.array([numpy.nan if c[2] is None else float(c[2]) for c in calls]),
            names,
            5,
        )
        assert columns == loops_of(lists)


def test_grouped_keeps_the_order_groups_come_in() -> None:
    groups = numpy.array([4, 2, 4, 9, 2], dtype=numpy.int64)
    values = numpy.array([3.0, 1.0, 0.5, 7.0, 0.25])
    assert grouped(numpy, groups, values) == {4: [0.5, 3.0], 2: [0.25, 1.0], 9: [7.0]}
    assert grouped(numpy, groups[:0], values[:0]) == {}
