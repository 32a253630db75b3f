"""Books: a ledger actor that prices what it records, and a summary."""

from __future__ import annotations

import ray

from shop._kit import decorate_if_asked
from shop.catalog import price


@ray.remote
def summarize(values: list[int]) -> dict[str, int]:
    return {"count": len(values), "sum": sum(values)}


@ray.remote
class Ledger:
    def __init__(self) -> None:
        self.lines: list[int] = []

    def record(self, name: str) -> int:
        self.lines.append(ray.get(price.remote(name)))
        return sum(self.lines)


@ray.remote
def close_books(day: str) -> None:
    raise RuntimeError(f"books for {day} do not balance")


decorate_if_asked(globals())
