"""Unit tier: the hot path's call.start / call.end lines are the schema renderers' bytes."""

from __future__ import annotations

import json
from unittest import mock

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._output import call_lines, encode
from raytrace_kit._output.schema import Call, CallStart
from raytrace_kit._process import ProcessIdentity

IDENTITY = ProcessIdentity("01000000", "ab" * 28, "cd" * 28, 4242, is_worker=True)
figure = st.none() | st.integers(min_value=0, max_value=2**48)
seconds = st.none() | st.floats(min_value=0, max_value=1e5, allow_nan=False)
moments = st.floats(min_value=1e9, max_value=4e9, allow_nan=False)


def _fragment(task_name: str | None, parent: str | None) -> str:
    return encode.call_members(
        call_id="0123456789abcdef",
        spec_fragment=encode.members({"function": "m.C.f", "kind": "actor_method"}),
        mode="ray",
        task_id="ff" * 24,
        actor_id="ee" * 16,
        identity=IDENTITY,
        attempt=1,
        task_name=task_name,
        parent=parent,
    )


def _at(moment: float):
    """Both renderers see the same time of day."""
    return mock.patch("time.time", return_value=moment)


class TestSameBytes:
    """Each line the boundary writes is byte for byte what encode.py renders."""

    @given(
        moment=moments,
        figures=st.tuples(figure, figure, figure),
        task_name=st.none() | st.text(max_size=20),
        parent=st.none() | st.just("ab12/cd34"),
        tail=st.sampled_from(["", ',"args":[1,"x"]']),
    )
    def test_start(
        self,
        moment: float,
        figures: tuple[int | None, int | None, int | None],
        task_name: str | None,
        parent: str | None,
        tail: str,
    ) -> None:
        """call.start, its figures known or not, any task name, arguments or none."""
        fragment = _fragment(task_name, parent)
        with _at(moment), mock.patch.object(call_lines, "_time", return_value=moment):
            fast = call_lines.start_line(fragment, *figures, tail)
            schema = encode.call_line(
                "call.start", "info", fragment, encode.memory_members(figures) + tail
            )
        assert fast == schema
        assert json.loads(fast)["event"] == "call.start"

    @given(
        moment=moments,
        duration=st.floats(min_value=0, max_value=1e5, allow_nan=False),
        cpu=seconds,
        process_cpu=seconds,
        figures=st.tuples(figure, figure, figure),
        rss_start=figure,
        failed=st.booleans(),
        tail=st.sampled_from(["", ',"data":{"op":"MapBatches(f)"}']),
    )
    def test_end(  # noqa: PLR0917 -- one argument per drawn value
        self,
        moment: float,
        duration: float,
        cpu: float | None,
        process_cpu: float | None,
        figures: tuple[int | None, int | None, int | None],
        rss_start: int | None,
        failed: bool,
        tail: str,
    ) -> None:
        """call.end, returned or failed, each clock and figure known or not."""
        fragment = _fragment("C.f", None)
        error = KeyError("missing") if failed else None
        with _at(moment), mock.patch.object(call_lines, "_time", return_value=moment):
            fast = call_lines.end_line(
                fragment, duration, error, cpu, process_cpu, figures, rss_start, tail
            )
            members = encode.end_members(
                duration,
                error,
                cpu,
                rss_start=rss_start,
                figures=figures,
                process_cpu_s=process_cpu,
            )
            schema = encode.call_line(
                "call.end", "error" if failed else "info", fragment, members + tail
            )
        assert fast == schema


class TestReadersDecode:
    """The readers' records decode the hot path's lines."""

    def test_start_and_end_decode(self) -> None:
        """A call's two lines, as the report joins them."""
        fragment = _fragment("C.f", "ab12/cd34")
        start = call_lines.start_line(fragment, 100, 60, 120)
        end = call_lines.end_line(fragment, 0.25, None, 0.2, None, (150, 90, 150), 100)
        begun = json.loads(start)
        assert CallStart(begun["call_id"], begun["timestamp"], begun["rss_bytes"]).rss_bytes == 100
        call = msgspec.json.decode(end, type=Call)
        assert (call.status, call.duration_s, call.cpu_s, call.process_cpu_s) == (
            "ok",
            0.25,
            0.2,
            None,
        )
        assert (call.rss_start_bytes, call.rss_end_bytes, call.rss_growth_bytes) == (100, 150, 50)
        assert (call.parent_call_id, call.parent_task_id, call.task_name) == ("ab12", "cd34", "C.f")
