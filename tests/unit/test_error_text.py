"""Unit tier: Ray's errors recognised from their text as programs log it (no Ray started)."""

from __future__ import annotations

import os

import pytest
import ray.exceptions as ray_errors
from ray import ActorID, TaskID

from raytrace_kit import explain
from raytrace_kit._reports.explain import class_of_message, task_id_of

_OBJECT = "ab" * 28  # an object id: its producing task's 48 hex digits, then its index
_OOM = (
    "Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 172.17.0.2, ID: 90efe99b) where the task (task ID: "
    "a6755d1708846b10007fda8a687eb57eb8a083c001000000, name=allocate_memory, pid=91085, "
    "memory used=24.99GB) was running was 32.62GB / 33.28GB (0.980175), which exceeds the "
    "memory usage threshold of 0.96."
)


def _errors() -> list[BaseException]:
    """Ray's own error objects, built as Ray builds them (their str() is Ray's wording).

    Those of the installed Ray: ``UnserializableException`` came in Ray 2.51.
    """
    unserializable = getattr(ray_errors, "UnserializableException", None)
    return [
        ray_errors.WorkerCrashedError(),
        ray_errors.ActorDiedError(),
        ray_errors.RayActorError(),
        ray_errors.LocalRayletDiedError(),
        ray_errors.ObjectStoreFullError(),
        ray_errors.OutOfDiskError(),
        ray_errors.RuntimeEnvSetupError(),
        ray_errors.TaskPlacementGroupRemoved(),
        ray_errors.ActorPlacementGroupRemoved(),
        ray_errors.ObjectLostError(_OBJECT, None, "pipeline.py:3"),
        ray_errors.OwnerDiedError(_OBJECT, None, "pipeline.py:3"),
        ray_errors.ObjectFetchTimedOutError(_OBJECT, None, "pipeline.py:3"),
        ray_errors.ObjectFreedError(_OBJECT, None, "pipeline.py:3"),
        # Keywords: Ray 2.40's arguments are (object, owner, call site), 2.60's (object,
        # reason, reason message, owner, call site).
        ray_errors.ObjectReconstructionFailedError(_OBJECT, owner_address=None, call_site=""),
        ray_errors.OutOfMemoryError(_OOM),
        ray_errors.RaySystemError("raylet gone"),
        ray_errors.TaskUnschedulableError("no node has GPU"),
        ray_errors.ActorUnschedulableError("no node has GPU"),
        ray_errors.GetTimeoutError("Get timed out: some object(s) not ready."),
        ray_errors.TaskCancelledError(TaskID(os.urandom(24))),
        ray_errors.ActorUnavailableError("RpcError", ActorID(os.urandom(16)).binary()),
        *([unserializable("Traceback ...")] if unserializable else []),
    ]


class TestLoggedMessages:
    """str(error), written to a log without its class, is explained as the error itself."""

    @pytest.mark.parametrize("error", _errors(), ids=lambda e: type(e).__name__)
    def test_the_message_alone_gets_the_errors_explanation(self, error: BaseException) -> None:
        """explain(str(e)) says what explain(e) says, never 'Not a Ray error'."""
        assert explain(str(error)).kind == explain(error).kind != "Not a Ray error"

    @pytest.mark.parametrize("error", _errors(), ids=lambda e: type(e).__name__)
    def test_each_message_names_its_own_class(self, error: BaseException) -> None:
        """The table knows each class by the fixed part of Ray's own message for it."""
        named = class_of_message(str(error))
        assert named is not None
        assert isinstance(error, getattr(ray_errors, named))

    def test_text_that_is_no_ray_error_stays_unknown(self) -> None:
        """An ordinary message is not mistaken for Ray's."""
        assert class_of_message("KeyError: 'user_id'") is None
        assert explain("something went wrong in my code").kind == "Not a Ray error"


class TestTaskIds:
    """The task an error names, where Ray's error carries one."""

    def test_a_cancellation_names_its_task(self) -> None:
        """TaskCancelledError carries the task id; its text does too."""
        task = TaskID(os.urandom(24))
        error = ray_errors.TaskCancelledError(task)
        assert task_id_of(error) == task.hex() == task_id_of(str(error))

    def test_an_oom_kill_names_its_task(self) -> None:
        """Ray's memory monitor names the task it killed."""
        expected = "a6755d1708846b10007fda8a687eb57eb8a083c001000000"
        assert task_id_of(ray_errors.OutOfMemoryError(_OOM)) == expected

    def test_a_lost_object_names_the_task_that_made_it(self) -> None:
        """An object id starts with its producing task's id."""
        assert task_id_of(ray_errors.ObjectLostError(_OBJECT, None, "x")) == _OBJECT[:48]

    def test_an_error_without_ids_names_none(self) -> None:
        """A crashed worker's error carries no task id: none is made up."""
        assert task_id_of(ray_errors.WorkerCrashedError()) is None

    def test_the_explanation_says_which_task(self) -> None:
        """Without a recorded call, the explanation names the task and how to look it up."""
        task = TaskID(os.urandom(24))
        explained = explain(ray_errors.TaskCancelledError(task))
        assert f"names task {task.hex()[:16]}" in explained.what
        assert f"raytrace-kit explain --task {task.hex()[:16]}" in explained.check
