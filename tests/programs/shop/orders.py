"""Orders: totals that fan out to prices, an async checkout, streamed receipts."""

from __future__ import annotations

import ray

from shop._kit import decorate_if_asked
from shop.catalog import price


@ray.remote
def total(names: list[str]) -> int:
    return sum(ray.get([price.remote(name) for name in names]))


@ray.remote
class Checkout:
    async def pay(self, amount: int) -> str:
        return f"paid {amount}"


@ray.remote
def receipts(count: int):
    for number in range(count):
        yield f"receipt {number}"


@ray.remote
def broken(order: str) -> None:
    raise KeyError(order)


decorate_if_asked(globals())
