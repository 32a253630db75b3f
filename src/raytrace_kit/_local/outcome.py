"""What a local call returns: the refs Ray would give for its value, its items or its error."""

from __future__ import annotations

from typing import Any

from ray.exceptions import RayTaskError

from raytrace_kit import _ray_versions
from raytrace_kit._local import refs

__all__ = ["Outcome", "failed_refs", "package"]


class Outcome:
    """What a local call produced: a value (or generator items) and/or an exception."""

    __slots__ = ("error", "items", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.items: list[Any] | None = None
        self.error: BaseException | None = None


def package(outcome: Outcome, num_returns: Any, copy: bool, function: str) -> Any:
    """Turn an outcome into what ``.remote()`` returns in Ray for these ``num_returns``."""
    if outcome.items is not None and num_returns in (None, "streaming"):
        made = [refs.value_ref(item, copy, function) for item in outcome.items]
        if outcome.error is not None:
            made.append(refs.error_ref(outcome.error, function))
        return refs.LocalRefGenerator(made)
    if num_returns == "dynamic":
        if outcome.error is not None:
            return refs.error_ref(outcome.error, function)
        produced = outcome.items if outcome.items is not None else list(outcome.value)
        inner = _ray_versions.DynamicObjectRefGenerator(
            [refs.value_ref(v, copy, function) for v in produced]
        )
        return refs.value_ref(inner, False, function)
    count = 1 if num_returns is None else int(num_returns)
    error = outcome.error
    value = outcome.items if outcome.items is not None else outcome.value
    values: list[Any] = [value]
    if error is None and count != 1:
        values = list(value) if count else []
        if len(values) != count:
            error = ValueError(f"Task returned {len(values)} objects, but num_returns={count}.")
    if count == 0:
        return None
    if error is not None:
        made = [refs.error_ref(error, function) for _ in range(count)]
    else:
        made = [refs.value_ref(v, copy, function) for v in values]
    return made[0] if count == 1 else made


def failed_refs(error: RayTaskError, num_returns: Any, function: str) -> Any:
    """What a call whose dependency failed returns: that error, in each of its refs."""
    ref = refs.error_ref(error, function)
    count = 1 if num_returns in (None, "streaming", "dynamic") else int(num_returns)
    return ref if count == 1 else [ref] * count
