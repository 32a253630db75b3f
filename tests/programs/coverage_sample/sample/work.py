"""Functions and classes with branches, run as tasks, actors and generators in the tests."""

from __future__ import annotations

import asyncio
import os
import time


def classify(n: int) -> str:
    if n < 0:
        return "negative"
    if n == 0:
        return "zero"
    return "positive"


def squares(n: int):
    for i in range(n):
        if i % 2:
            yield i * i
        else:
            yield -i


def on_second_node(x: int) -> int:
    if x > 100:
        return x
    return x + 1


def pause_then_exit(seconds: float) -> None:
    time.sleep(seconds)
    if seconds >= 0:
        os._exit(1)


class Counter:
    def __init__(self, start: int) -> None:
        start = max(start, 0)
        self.total = start

    def add(self, n: int) -> int:
        if n > 10:
            self.total += 10
        else:
            self.total += n
        return self.total


class AsyncCounter:
    def __init__(self) -> None:
        self.total = 0

    async def add(self, n: int) -> int:
        await asyncio.sleep(0)
        if n % 2:
            self.total += n
        return self.total


class Threaded:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def note(self, n: int) -> int:
        if n in self.seen:
            return 0
        self.seen.append(n)
        return n


class Doomed:
    def touch(self, n: int) -> int:
        if n:
            return n * 2
        return -1
