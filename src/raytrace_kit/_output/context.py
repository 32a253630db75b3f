"""The instrumented call running in this thread or coroutine (``CURRENT_CALL``)."""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from typing import Any

from raytrace_kit import _process, _registry
from raytrace_kit._output import encode

__all__ = ["CURRENT_CALL", "PARENT_KWARG", "ActiveCall", "parent_token"]


class ActiveCall:
    """The instrumented call running in this thread or coroutine.

    Ray ids are captured by :meth:`capture` in the thread that runs the call: at once
    when call events are written, otherwise on the first ``get_logger()`` event, so a
    call with ``log=False`` pays only for this object.

    Attributes:
        owner: ``id()`` of the actor instance running the call, ``None`` for tasks.
        started: ``time.perf_counter()`` at the start of the call.
        fragment: The call's JSON members shared by ``call.start`` and ``call.end``.
        watch: Its ``stuck_after`` (``None``: the process's; ``False``: not watched), set
            by the boundary.
        task: The asyncio task running it (async calls only; read with ``getattr``).
    """

    __slots__ = (
        "_fields",
        "actor_id",
        "attempt",
        "call_id",
        "fragment",
        "identity",
        "local_actor_id",
        "local_attempt",
        "local_task",
        "mode",
        "owner",
        "parent",
        "rss_start",
        "spec_fields",
        "spec_fragment",
        "started",
        "task",
        "task_id",
        "task_name",
        "thread",
        "watch",
    )

    watch: float | bool | None  # set by the boundary
    task: Any  # set for async calls only

    def __init__(  # noqa: PLR0917 -- positional: built once per call, on the hot path
        self,
        spec_fields: dict[str, str],
        spec_fragment: str,
        mode: str,
        owner: int | None,
        local_actor_id: str | None = None,
        local_attempt: int = 0,
        parent: str | None = None,
        local_task: Any = None,
    ) -> None:
        self.parent = parent  # parent_token() of the submitting call, if any
        self.local_actor_id = local_actor_id
        self.local_attempt = local_attempt
        self.local_task = local_task  # local mode: what keeps the task id over retries
        self.spec_fields = spec_fields
        self.spec_fragment = spec_fragment
        self.mode = mode
        self.owner = owner
        self.started = time.perf_counter()
        self.rss_start: int | None = None  # the process's RSS at call.start, for call.end
        self.thread = threading.get_ident()
        self.call_id: str | None = None
        self.fragment = ""
        self._fields: dict[str, Any] | None = None

    def capture(self) -> None:
        """Read the Ray ids of the running task and render the shared JSON members."""
        self.call_id = _process.new_call_id()
        if self.mode != "local":  # "ray", or "pinned" (a Ray actor task)
            identity = self.identity = _process.state.worker_identity or _process.process_identity()
            if identity.is_worker:
                self.task_id, self.actor_id, self.attempt, self.task_name = _process.running_task()
            else:  # Ray's own local mode (Ray 2.40-2.54): the driver runs every call, and
                # Ray has no task or actor id of a call to give there (its driver's ids)
                self.task_id = self.actor_id = self.task_name = None
                self.attempt = 0
        else:  # local mode: no Ray task behind the call; ids of its own, as Ray's would be
            identity = self.identity = _process.local_identity()
            self.actor_id = self.local_actor_id
            held = self.local_task  # a retry is the same task: its first attempt's id
            task_id = None if held is None else held.task_id
            if task_id is None:
                task_id = _process.local_task_id(self.actor_id, identity.job_id)
                if held is not None:
                    held.task_id = task_id
            self.task_id = task_id
            self.attempt = self.local_attempt
            named = None if held is None else held.task_name  # .options(name=...)
            self.task_name = named or _local_task_name(
                self.spec_fields.get("function"), self.actor_id
            )
        self.fragment = encode.call_members(
            call_id=self.call_id,
            spec_fragment=self.spec_fragment,
            mode=self.mode,
            task_id=self.task_id,
            actor_id=self.actor_id,
            identity=identity,
            attempt=self.attempt,
            task_name=self.task_name,
            parent=self.parent,
        )

    @property
    def fields(self) -> dict[str, Any]:
        """The call's fields as a dict (what ``get_logger()`` events carry)."""
        if self._fields is None:
            if self.call_id is None:
                self.capture()
            identity = self.identity
            parent_call, _, parent_task = (self.parent or "").partition("/")
            self._fields = {
                "call_id": self.call_id,
                "parent_call_id": parent_call or None,
                "parent_task_id": parent_task or None,
                **self.spec_fields,
                "mode": self.mode,
                "task_id": self.task_id,
                "task_name": self.task_name,
                "actor_id": self.actor_id,
                "job_id": identity.job_id,
                "node_id": identity.node_id,
                "worker_id": identity.worker_id,
                "pid": identity.pid,
                "attempt": self.attempt,
            }
        return self._fields


def parent_token(call: ActiveCall | None) -> str | None:
    """What a call submitted during ``call`` carries to name it: ``call_id/task_id``.

    ``None`` outside any call. Captures the call's ids if it has not yet (``log=False``).
    """
    if call is None:
        return None
    if call.call_id is None:
        call.capture()
    return f"{call.call_id}/{call.task_id or ''}"


def _local_task_name(function: str | None, actor_id: str | None) -> str | None:
    """The name Ray would give the call: the function's, or ``Class.method``."""
    return _task_name(function, actor_id is not None)


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=1024)
def _task_name(function: str | None, method: bool) -> str | None:
    if function is None:
        return None
    parts = function.split(".")
    return ".".join(parts[-2:]) if method else parts[-1]


# The keyword argument that carries parent_token() to an instrumented task or method.
PARENT_KWARG = "_raytrace_parent"

# The worker sets it around every call; get_logger() events pick the fields up from here.
CURRENT_CALL: contextvars.ContextVar[ActiveCall | None] = contextvars.ContextVar(
    "raytrace_kit_current_call", default=None
)
