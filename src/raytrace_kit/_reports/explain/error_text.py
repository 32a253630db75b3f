"""Ray's errors known by their own words: the class a printed message belongs to, the task it names.

Programs log ``str(error)``, which for most of Ray's errors does not name the class
(``str(WorkerCrashedError())`` is "The worker died unexpectedly while executing this
task..."). Each pattern below is the fixed part of the message Ray 2.60 builds for that
class (``tests/unit/test_error_text.py`` checks every one against Ray's own objects).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["class_of_message", "task_id_of"]

# Most specific first: several object errors share "Failed to retrieve object".
_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), name)
    for pattern, name in (
        (r"The worker died unexpectedly while executing this task", "WorkerCrashedError"),
        (r"Task was killed due to the node running low on memory", "OutOfMemoryError"),
        (r"The actor \w+ is unavailable", "ActorUnavailableError"),
        (r"The actor is not schedulable", "ActorUnschedulableError"),
        (r"The task is not schedulable", "TaskUnschedulableError"),
        (r"The actor died|The actor is dead", "ActorDiedError"),
        (r"The actor experienced an error before finishing", "RayActorError"),
        (r"The task's local raylet died", "LocalRayletDiedError"),
        (r"object store is full and the local disk's utilization", "OutOfDiskError"),
        (r"The local object store is full of objects", "ObjectStoreFullError"),
        (r"Failed to set up runtime environment", "RuntimeEnvSetupError"),
        (
            r"placement group corresponding to this task has been removed",
            "TaskPlacementGroupRemoved",
        ),
        (
            r"placement group corresponding to this Actor has been removed",
            "ActorPlacementGroupRemoved",
        ),
        (r"The object's owner has exited", "OwnerDiedError"),
        (r"All copies of \w+ have been lost", "ObjectLostError"),
        (r"Fetch for object \w+ timed out", "ObjectFetchTimedOutError"),
        (r"manually freed using the internal `free` call", "ObjectFreedError"),
        (r"Failed to retrieve object \w+", "ObjectReconstructionFailedError"),
        (r"Failed to deserialize exception", "UnserializableException"),
        (r"Get timed out", "GetTimeoutError"),
        (r"Task: TaskID\(\w+\) was cancelled", "TaskCancelledError"),
        (r"(?m)^System error: ", "RaySystemError"),
    )
)

_OOM_TASK = re.compile(r"\(task ID: (?P<task>[0-9a-f]{16,}),")
_CANCELLED_TASK = re.compile(r"TaskID\((?P<task>[0-9a-f]{16,})\)")
_OBJECT = re.compile(r"Failed to retrieve object (?P<object>[0-9a-f]{56})\b")
_TASK_ID_HEX = 48  # an object id is its producing task's id plus 8 hex digits of index


def class_of_message(text: str) -> str | None:
    """The name of the Ray error class whose message ``text`` is (or contains), if any."""
    for pattern, name in _MESSAGES:
        if pattern.search(text):
            return name
    return None


def task_id_of(error: BaseException | str) -> str | None:
    """The task a Ray error names, where it carries one (hex), else ``None``.

    A cancellation carries its task id; an out-of-memory kill names the task in its
    message; a lost or unreachable object's id starts with the id of the task that made
    it (a ``ray.put`` object's "task" is its creator's, which has no call of its own).
    """
    task: Any = getattr(error, "task_id", None)
    if task is not None and hasattr(task, "hex"):
        return str(task.hex())
    text = str(error)
    for pattern in (_OOM_TASK, _CANCELLED_TASK):
        found = pattern.search(text)
        if found:
            return found["task"]
    hex_id = getattr(error, "object_ref_hex", None)
    if not isinstance(hex_id, str):
        found = _OBJECT.search(text)
        hex_id = found["object"] if found else None
    return hex_id[:_TASK_ID_HEX] if hex_id else None
