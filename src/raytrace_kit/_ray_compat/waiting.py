"""Ray's functions that a sampled thread waits in when they are its innermost frame."""

from __future__ import annotations

from types import CodeType

import ray

__all__ = ["waits_in_ray"]

# ray.get's and ray.wait's frames (the C call under them blocks), and the worker's idle task
# loop (Ray's C++ core runs it; the main thread of a worker between calls is there).
_WAITING_IN_RAY = frozenset({"get_objects", "get", "wait", "main_loop"})
# No public API names the file; ray/_private/worker.py in Ray 2.40 to 2.60.
_WORKER_FILE = ray._private.worker.__file__
# Ray's GCS client calls (gRPC in C) that block the thread: ray.init's loop waiting for its
# node to register (GlobalState.get_node) and the key-value store's reads. A driver spends
# seconds there while Ray starts; counted as running, ray.init was every run's hottest line.
_GCS_WAITS = frozenset(
    {
        (ray._private.state.__file__, "get_node"),
        (ray.experimental.internal_kv.__file__, "_internal_kv_get"),
    }
)


def waits_in_ray(code: CodeType) -> bool:
    """Whether ``code`` (a thread's innermost frame's) is Ray's get, wait, idle loop, or GCS."""
    if code.co_name in _WAITING_IN_RAY and code.co_filename == _WORKER_FILE:
        return True
    return (code.co_filename, code.co_name) in _GCS_WAITS
