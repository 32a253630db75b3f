"""The local-mode setting in force here: process-wide, per context, and per call.

Ray removed ``ray.init(local_mode=True)``. In local mode a debuggable call runs in the
calling thread, in submission order, so ``breakpoint()``, pdb, IDE breakpoints and a
driver-side profiler see the user's code directly.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from raytrace_kit._local import state as local_state
from raytrace_kit._options import DebugOptions

__all__ = ["DEFAULT_ON", "OFF", "OVERRIDE", "LocalConfig", "config_for", "current", "is_local_mode"]


@dataclass(frozen=True, slots=True)
class LocalConfig:
    """How local calls run.

    Attributes:
        enabled: Whether debuggable calls run locally.
        copy: Copy arguments and results through Ray's serializer.
        post_mortem: Open ``pdb.post_mortem`` at the failing frame when a call raises.
        strict: A plain ``@ray.remote`` call raises instead of warning.
    """

    enabled: bool = True
    copy: bool = True
    post_mortem: bool = False
    strict: bool = False


OFF = LocalConfig(enabled=False)
DEFAULT_ON = LocalConfig()

# Overrides the process-wide setting (local_state.state.setting) in a context: set by
# `with local_mode(...)`, and while a local call runs (so calls made inside it run locally).
OVERRIDE: contextvars.ContextVar[LocalConfig | None] = contextvars.ContextVar(
    "raytrace_kit_local_mode", default=None
)


def _process_wide() -> LocalConfig:
    setting: LocalConfig | None = local_state.state.setting
    return OFF if setting is None else setting


def current() -> LocalConfig:
    """The setting in force in this context."""
    override = OVERRIDE.get()
    return _process_wide() if override is None else override


def is_local_mode() -> bool:
    """Whether debuggable calls made here run in this process.

    Returns:
        ``True`` inside ``with local_mode():``, after ``set_local_mode(True)`` (or with
        ``RAYTRACE_LOCAL_MODE=1``), and inside a call that runs locally.
    """
    return current().enabled


def config_for(options: DebugOptions) -> LocalConfig | None:
    """The local config a call with ``options`` runs under, or ``None`` to go to Ray."""
    if options.local is False:
        return None
    config = current()
    if config.enabled:
        return config
    if options.local:
        process_wide = _process_wide()
        return (
            DEFAULT_ON
            if process_wide is OFF
            else LocalConfig(copy=process_wide.copy, strict=process_wide.strict)
        )
    return None
