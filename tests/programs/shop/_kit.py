"""``SHOP_DECORATE=1``: the same program with every remote decorated by hand."""

from __future__ import annotations

import os
from typing import Any

from ray.actor import ActorClass
from ray.remote_function import RemoteFunction


def decorate_if_asked(names: dict[str, Any]) -> None:
    """Replace each remote function and actor class in ``names`` with its debuggable proxy."""
    if not os.environ.get("SHOP_DECORATE"):
        return
    from raytrace_kit import debuggable  # noqa: PLC0415 -- only the decorated run needs it

    for name, value in list(names.items()):
        if isinstance(value, RemoteFunction | ActorClass):
            names[name] = debuggable(value)
