"""What differs between the Ray versions the kit supports, in Ray's public API.

Where a name lives and which error Ray raises, for Ray 2.40 to 2.60 (docs/compatibility.md);
each difference with a comment naming the versions. Differences in Ray's private API are
in :mod:`raytrace_kit._ray_compat`.
"""

from __future__ import annotations

import traceback
from typing import Any

import ray
import ray.exceptions

__all__ = ["ActorAlreadyExistsError", "DynamicObjectRefGenerator", "error_as_delivered"]

# What ray.get of a num_returns="dynamic" call's ref gives: its refs, iterable, with len().
# Public under ``ray`` in every supported version; its module moved (``ray._raylet`` in
# Ray 2.40-2.44, ``ray._private.object_ref_generator`` from 2.45).
DynamicObjectRefGenerator: Any = ray.DynamicObjectRefGenerator

# What a named actor whose name is taken raises at ``.remote()``: Ray 2.53 and later raise
# ``ActorAlreadyExistsError`` (a ``ValueError``); Ray 2.40-2.52 a plain ``ValueError``, with
# the same message.
ActorAlreadyExistsError: type[Exception] = getattr(
    ray.exceptions, "ActorAlreadyExistsError", ValueError
)


def error_as_delivered(serialized: bytes) -> Exception | None:
    """What ``ray.get`` raises in place of a task's error Ray cannot unpickle, else ``None``.

    ``serialized`` is the error's ``RayError.to_bytes()``, as the worker sends it. An
    exception that pickles but cannot be unpickled (an ``__init__`` whose arguments are not
    its ``args``) arrives, from Ray 2.51, as ``UnserializableException`` with its text; Ray
    2.40-2.50's deserializer catches the failure and delivers a ``RaySystemError`` instead.
    """
    try:
        delivered: Exception = ray.exceptions.RayError.from_bytes(serialized)
    except Exception as failure:  # Ray 2.40-2.50: "Failed to unpickle serialized exception"
        system_error: Exception = ray.exceptions.RaySystemError(failure, traceback.format_exc())
        return system_error
    unserializable = getattr(ray.exceptions, "UnserializableException", None)  # Ray 2.51+
    if unserializable is not None and isinstance(delivered, unserializable):
        return delivered  # type: ignore[no-any-return]  # isinstance of an untyped class
    return None
