"""Items: parsed, priced and kept in stock."""

from __future__ import annotations

import ray

from shop._kit import decorate_if_asked


@ray.remote
def parse(line: str) -> tuple[str, int]:
    name, count = line.split(":")
    return name, int(count)


@ray.remote(num_cpus=1)
def price(name: str) -> int:
    return len(name) * 10


@ray.remote
class Inventory:
    def __init__(self, stock: int) -> None:
        self.stock = stock

    def take(self, count: int) -> int:
        if count > self.stock:
            raise ValueError(f"only {self.stock} left, {count} asked")
        self.stock -= count
        return self.stock


decorate_if_asked(globals())
