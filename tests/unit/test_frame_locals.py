"""Unit tier: a traceback as reports show it, each frame's locals under its code (no Ray)."""

from __future__ import annotations

from typing import Any

from raytrace_kit._output.locals import frames_locals
from raytrace_kit._output.tracebacks import user_traceback
from raytrace_kit._reports.explain import traceback_with_locals

TRACEBACK = """\
Traceback (most recent call last):
  File "/app/job.py", line 20, in price
    return helper(qty, discount)
           ^^^^^^^^^^^^^^^^^^^^^
  File "/app/job.py", line 9, in helper
    return total * discount / qty
           ~~~~~~~~~~~~~~~~~^~~~~
ZeroDivisionError: float division by zero
"""


def _fail(qty: int, discount: float) -> float:
    total = 100
    return total * discount / qty


class TestTracebackWithLocals:
    """traceback_with_locals(): under each frame's code, its locals; else the traceback as is."""

    def test_each_frame_gets_its_own_locals_after_its_code(self) -> None:
        frames = [
            ["/app/job.py", 20, "price", {"qty": "int", "discount": "float"}],
            ["/app/job.py", 9, "helper", {"qty": "int", "total": "int"}, {"qty": "0"}],
        ]
        assert (
            traceback_with_locals(TRACEBACK, frames)
            == """\
Traceback (most recent call last):
  File "/app/job.py", line 20, in price
    return helper(qty, discount)
           ^^^^^^^^^^^^^^^^^^^^^
    locals:
      qty: int
      discount: float
  File "/app/job.py", line 9, in helper
    return total * discount / qty
           ~~~~~~~~~~~~~~~~~^~~~~
    locals:
      qty: int = 0
      total: int
ZeroDivisionError: float division by zero
"""
        )

    def test_without_locals_or_with_bad_records_the_traceback_is_unchanged(self) -> None:
        assert traceback_with_locals(TRACEBACK, None) == TRACEBACK
        bad: list[Any] = ["text", ["/app/job.py", 9], ["/app/job.py", 9, "helper", "not a dict"]]
        assert traceback_with_locals(TRACEBACK, bad) == TRACEBACK
        other = [["/app/other.py", 9, "helper", {"qty": "int"}]]
        assert traceback_with_locals(TRACEBACK, other) == TRACEBACK

    def test_left_out_locals_and_multiline_values(self) -> None:
        frames = [
            ["/app/job.py", 9, "helper", {"frame": "DataFrame of 2x1", "...": "12 more"},
             {"frame": "   a\n0  1\n1  2"}],
        ]  # fmt: skip
        text = traceback_with_locals(TRACEBACK, frames)
        assert "      frame: DataFrame of 2x1 =    a\\n0  1\\n1  2\n      ... 12 more\n" in text

    def test_a_shortened_recursion_shows_the_innermost_once(self) -> None:
        text = (
            "Traceback (most recent call last):\n"
            + '  File "/app/r.py", line 3, in down\n    down(n - 1)\n' * 3
            + "  [Previous line repeated 5 more times]\n"
            + "RecursionError: too deep\n"
        )
        frames = [["/app/r.py", 3, "down", {"n": f"int {i}"}] for i in range(8)]
        shown = traceback_with_locals(text, frames)
        assert shown.count("locals:") == 1
        assert "n: int 7\n  [Previous line repeated" in shown

    def test_a_real_failure_round_trips(self) -> None:
        """What the worker records of an error, shown under that error's own traceback."""
        try:
            _fail(0, 0.5)
        except ZeroDivisionError as error:
            text = traceback_with_locals(user_traceback(error), frames_locals(error))
        line = _fail.__code__.co_firstlineno + 2
        after = text.split(f"line {line}, in _fail\n", 1)[1].splitlines()
        assert after[:2] == [
            "    return total * discount / qty",
            "           ~~~~~~~~~~~~~~~~~^~~~~",
        ]
        assert after[2:6] == [
            "    locals:",
            "      qty: int",
            "      discount: float",
            "      total: int",
        ]
