"""``ray.get_runtime_context()`` in local mode: it describes the local call, never a cluster.

Inside a local call the context gives that call's ids (the ones its events carry): task
id, actor id, ``current_actor``, and the job, node and worker ids of this process (Ray's,
when Ray is initialized; else ids of its own, stable for the process). Outside any call,
in local mode without Ray, it describes the driver as Ray would (no task, no actor). What
only a cluster can answer (its GCS address, session, temp dir) raises
:class:`~raytrace_kit.LocalModeError` instead of starting one.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.runtime_context import RuntimeContext

from raytrace_kit import _process, _ray_compat
from raytrace_kit._local import state as local_state
from raytrace_kit._local.handles import LocalActorHandle
from raytrace_kit._output.context import ActiveCall
from raytrace_kit.exceptions import LocalModeError

__all__ = ["LocalRuntimeContext"]


class _NoCluster:
    """Stands for Ray's worker object: anything asked of it names local mode."""

    def __getattr__(self, name: str) -> Any:
        msg = (
            "This part of ray.get_runtime_context() needs a Ray cluster, and this code runs "
            "in local mode without one. Call ray.init() first, or leave local mode."
        )
        raise LocalModeError(msg)


class LocalRuntimeContext(RuntimeContext):  # type: ignore[misc]  # untyped base
    """The runtime context of a local call (or of the driver, in local mode without Ray)."""

    def __init__(self, call: ActiveCall | None) -> None:
        super().__init__(_ray_compat.ray_worker() if ray.is_initialized() else _NoCluster())
        self._call = call
        if call is not None and call.call_id is None:
            call.capture()  # the ids the call's events carry (log=False captures on demand)
        self._identity = _process.local_identity() if call is None else call.identity

    def __getattr__(self, name: str) -> Any:
        # What neither class has: Ray's own error, naming Ray's class as a program sees it.
        msg = f"'RuntimeContext' object has no attribute '{name}'"
        raise AttributeError(msg, name=name, obj=self)

    def get_job_id(self) -> str:
        return str(self._identity.job_id)

    def get_node_id(self) -> str:
        return str(self._identity.node_id)

    def get_worker_id(self) -> str:
        return str(self._identity.worker_id)

    def get_task_id(self) -> str | None:
        return None if self._call is None else self._call.task_id

    def get_actor_id(self) -> str | None:
        return None if self._call is None else self._call.local_actor_id

    def _actor(self) -> Any:
        actor_id = self.get_actor_id()
        return None if actor_id is None else local_state.state.actors_by_id.get(actor_id)

    def get_actor_name(self) -> str | None:
        actor = self._actor()
        return None if actor is None else (actor.name or "")  # Ray: "" for an unnamed actor

    @property
    def current_actor(self) -> Any:
        actor = self._actor()
        if actor is None:
            msg = "This method is only available in an actor."
            raise RuntimeError(msg)
        return LocalActorHandle(actor)

    def get_task_function_name(self) -> str | None:
        return None if self._call is None else self._call.spec_fields.get("function")

    def get_task_name(self) -> str | None:
        return None if self._call is None else self._call.task_name

    @property
    def was_current_actor_reconstructed(self) -> bool:
        return False

    @property
    def namespace(self) -> str:
        if ray.is_initialized():
            return str(super().namespace)
        actor = self._actor()
        return (actor.namespace if actor is not None else None) or "raytrace_kit-local"

    def get_assigned_resources(self) -> dict[str, float]:
        return {}

    def get_accelerator_ids(self) -> dict[str, list[str]]:
        return {"GPU": []}

    def get_node_labels(self) -> dict[str, str]:
        return {}

    def get_placement_group_id(self) -> str | None:
        return None

    @property
    def should_capture_child_tasks_in_placement_group(self) -> bool:
        return False

    def get_runtime_env_string(self) -> str:
        return "{}"

    def is_canceled(self) -> bool:
        if self._call is None:
            msg = "This method is only available when the process is a worker. Current mode: 0"
            raise RuntimeError(msg)
        actor = self._actor()
        if actor is not None and actor.loop is not None:
            msg = "This method is not supported in an async actor."
            raise RuntimeError(msg)
        return False  # a sync local call runs to its end: nothing can cancel it midway

    def get(self) -> dict[str, Any]:
        return {
            "job_id": self.get_job_id(),
            "node_id": self.get_node_id(),
            "namespace": self.namespace,
            "task_id": self.get_task_id(),
            "actor_id": self.get_actor_id(),
        }


# What the installed Ray's context lacks, local mode's lacks too: a program sees Ray's own
# AttributeError, as without local mode. Ray 2.40 has no get_task_name or
# get_task_function_name (2.41), Ray 2.44 no get_node_labels (2.50 has it), Ray 2.53 no
# is_canceled (2.54).
for _name in [name for name in vars(LocalRuntimeContext) if not name.startswith("_")]:
    if not hasattr(RuntimeContext, _name):
        delattr(LocalRuntimeContext, _name)
