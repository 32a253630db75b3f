"""The public switches of local mode: ``local_mode()``, ``set_local_mode()``, ``is_local_mode()``.

``RAYTRACE_LOCAL_MODE=1`` in the environment turns local mode on for the whole process at
import.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from raytrace_kit._local import setting
from raytrace_kit._local import state as local_state
from raytrace_kit._local.hooks import activate
from raytrace_kit._local.setting import LocalConfig, is_local_mode
from raytrace_kit.exceptions import UsageError

__all__ = ["ENV_LOCAL_MODE", "activate", "is_local_mode", "local_mode", "set_local_mode"]

ENV_LOCAL_MODE = "RAYTRACE_LOCAL_MODE"


def set_local_mode(
    enabled: bool, *, copy: bool = True, post_mortem: bool = False, strict: bool = False
) -> None:
    """Turn local mode on or off for the whole process.

    ``with local_mode():`` blocks take precedence inside them.

    Args:
        enabled: Run debuggable calls in this process.
        copy: Copy arguments and results through Ray's serializer, as Ray does.
        post_mortem: Open ``pdb.post_mortem`` when a local call raises.
        strict: A plain ``@ray.remote`` call (which would run on Ray) raises
            :class:`~raytrace_kit.LocalModeError` instead of warning.
    """
    _require_bool("set_local_mode", enabled)
    if enabled:
        activate()
    local_state.state.setting = LocalConfig(
        enabled=enabled, copy=copy, post_mortem=post_mortem, strict=strict
    )


@contextmanager
def local_mode(
    enabled: bool = True, *, copy: bool = True, post_mortem: bool = False, strict: bool = False
) -> Iterator[None]:
    """Run every debuggable call made inside the block in this process.

    Nothing else changes in the code inside: ``f.remote(x)``, ``ray.get``, ``ray.wait``,
    ``ray.put``, actors, ``ray.get_actor`` and ``ray.kill`` work with or without
    ``ray.init()``; without it, no cluster is started. Blocks nest and restore the previous
    state on exit, also on exceptions. The setting belongs to the current thread or asyncio
    task (a ``contextvars`` context): threads started inside the block do not inherit it;
    use :func:`set_local_mode` for the whole process.

    Args:
        enabled: ``False`` turns local mode off inside the block.
        copy: Copy arguments and results through Ray's serializer (the default), so a call
            that mutates its argument does not change the caller's object and values Ray
            cannot serialize fail as in Ray. ``False`` passes objects as they are: faster,
            but a mutation is then visible to the caller.
        post_mortem: Open ``pdb.post_mortem`` at the failing frame when a call raises.
        strict: A plain (non-debuggable) ``@ray.remote`` call inside the block raises
            :class:`~raytrace_kit.LocalModeError`; by default it warns once per function,
            naming it. Either way, nothing in local mode starts a cluster silently.

    Example:
        >>> with local_mode():
        ...     result = ray.get(transform.remote(data))  # runs here; breakpoint() works
    """
    _require_bool("local_mode", enabled)
    if enabled:
        activate()
    config = LocalConfig(enabled=enabled, copy=copy, post_mortem=post_mortem, strict=strict)
    token = setting.OVERRIDE.set(config)
    try:
        yield
    finally:
        setting.OVERRIDE.reset(token)


def _require_bool(function: str, enabled: object) -> None:
    """``enabled`` must be a real bool: ``"no"`` would otherwise turn local mode on."""
    if not isinstance(enabled, bool):
        msg = (
            f"{function}() takes True or False, not {enabled!r}: "
            f"{function}(True) turns local mode on, {function}(False) off."
        )
        raise UsageError(msg)


if os.environ.get(ENV_LOCAL_MODE, "").strip().lower() in {"1", "true", "yes", "on"}:
    set_local_mode(True)
