"""Finding: one problem a report found in the records, with its evidence, its fix, its calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FUNCTIONS_NAMED", "Called", "Finding", "loop_title", "most_first"]


@dataclass(frozen=True)
class Called:
    """A function a finding's calls were of, and how many of them."""

    function: str
    calls: int


@dataclass(frozen=True)
class Finding:
    """One problem the records show: what, the evidence, and the fix.

    ``kind`` names the rule for machines (``tiny_tasks``, ``one_at_a_time``,
    ``serializing_actor``, ``leak``, ``cpu_oversubscription``, ``flaky_retries``,
    ``passed_by_value``, ``large_function``, and ``death_<cause>``); ``subject`` is the
    function, actor or process it is about.
    ``functions``: the functions of the calls it is about, most calls first, where the
    finding is about a line's calls (``driver_loop``: the calls the loop waited on).
    """

    title: str
    evidence: str
    fix: str
    kind: str = ""
    subject: str = ""
    functions: tuple[Called, ...] = ()


FUNCTIONS_NAMED = 5  # a loop's functions named in its title; the rest counted


def most_first(counts: Mapping[str, int]) -> tuple[Called, ...]:
    """Functions and their calls' counts, most calls first (then by name: the same each time)."""
    return tuple(Called(name, calls) for name, calls in sorted(counts.items(), key=_most))


def _most(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def loop_title(where: str, calls: int, called: Sequence[Called]) -> str:
    """A ``ray.get`` loop's title: its line, and the calls it waited on, by function.

    ``ray.get in a loop in the driver: main.py:13 waited on 20 calls of app.score one at
    a time``; with calls of several functions, ``... one at a time (12 of app.a, 8 of
    app.b)``; with none known (no submission records of that line), only how many.
    """
    said = f"ray.get in a loop in the driver: {where} waited on {calls:,} calls"
    if len(called) == 1:
        return f"{said} of {called[0].function} one at a time"
    said += " one at a time"
    if called:
        named = [f"{c.calls:,} of {c.function}" for c in called[:FUNCTIONS_NAMED]]
        if len(called) > FUNCTIONS_NAMED:
            named.append(f"{len(called) - FUNCTIONS_NAMED} more functions")
        said += f" ({', '.join(named)})"
    return said
