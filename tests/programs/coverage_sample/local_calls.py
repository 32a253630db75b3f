"""The same calls as ray_calls.py, made in this process: the reference (run by test_coverage.py)."""

from __future__ import annotations

import asyncio
import os

import pytest
from sample import work


class ExitedError(Exception):
    pass


def test_the_same_calls_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [work.classify(n) for n in (-1, 0, 1)] == ["negative", "zero", "positive"]
    assert list(work.squares(3)) == [0, 1, -2]
    assert work.on_second_node(1) == 2
    counter = work.Counter(-5)
    assert [counter.add(3), counter.add(30)] == [3, 13]
    asynchronous = work.AsyncCounter()
    assert [asyncio.run(asynchronous.add(n)) for n in (3, 4)] == [3, 3]
    threaded = work.Threaded()
    assert sorted([threaded.note(1), threaded.note(1)]) == [0, 1]
    doomed = work.Doomed()
    assert [doomed.touch(2), doomed.touch(0)] == [4, -1]

    def exit_here(status: int) -> None:
        raise ExitedError(status)

    monkeypatch.setattr(os, "_exit", exit_here)
    with pytest.raises(ExitedError):
        work.pause_then_exit(1.0)
