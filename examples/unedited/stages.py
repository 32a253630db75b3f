"""The stages of a small pipeline: plain ``@ray.remote``, nothing of raytrace_kit."""

from __future__ import annotations

import time

import ray


@ray.remote
def load(part: int) -> list[int]:
    return list(range(part * 10, part * 10 + 10))


@ray.remote
def clean(rows: list[int]) -> list[int]:
    if rows[0] == 50:  # one skewed part: the straggler the driver waits on
        time.sleep(3)
    return [row for row in rows if row % 7]


@ray.remote
class Totals:
    def __init__(self) -> None:
        self.seen = 0

    def add(self, rows: list[int]) -> int:
        self.seen += len(rows)
        return self.seen
