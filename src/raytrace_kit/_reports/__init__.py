"""Reading what the kit wrote: sessions, calls, reports, explanations, timelines, profiles.

Never imported by worker-side or output modules. Each room (subpackage) names what the
other rooms and layers use of it in its ``__init__``, loaded on first use by
:func:`lazy_names`: the rooms import each other's modules, so an eager ``__init__``
would import half the package, and could meet a room half-initialised.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A room's module ``__getattr__``: each name is its module's, loaded on first use.

    Args:
        package: The room's ``__name__``.
        modules: Each of its modules (by name in the room) → the names taken from it.

    Returns:
        The function to bind as the room's ``__getattr__``; a name it loads is kept in the
        room's namespace, so the next use costs nothing.
    """
    home = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:  # noqa: N807 -- the module attribute hook
        module = home.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
