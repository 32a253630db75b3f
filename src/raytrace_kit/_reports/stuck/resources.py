"""Ray resources as people write them, and whether a node has room for what a call asks."""

from __future__ import annotations

__all__ = ["fits", "fmt_resources", "room"]


def fmt_resources(resources: dict[str, float]) -> str:
    """``{CPU: 2, GPU: 1}`` as people write it (whole numbers without ``.0``)."""
    parts = []
    for name, amount in sorted(resources.items()):
        if name.startswith("node:") or name.endswith("_group"):
            continue
        if name in {"memory", "object_store_memory"}:
            parts.append(f"{name}: {amount / 2**30:.1f} GiB")
        else:
            parts.append(f"{name}: {amount:g}")
    return "{" + ", ".join(parts) + "}"


def fits(have: dict[str, float], asked: dict[str, float]) -> bool:
    """Whether ``have`` holds every amount ``asked`` (to within float rounding)."""
    return all(have.get(name, 0.0) >= amount - 1e-9 for name, amount in asked.items())


def room(have: dict[str, float], asked: dict[str, float]) -> tuple[float, ...]:
    """How much of each resource ``asked`` (by name) ``have`` holds: to find the largest."""
    return tuple(have.get(name, 0.0) for name in sorted(asked))
