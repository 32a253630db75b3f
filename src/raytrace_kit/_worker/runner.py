"""The actor that runs every call of a pinned function, one at a time, in its own process.

A plain actor: no concurrency group, so calls run on its main thread, as a task's do.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import ray

from raytrace_kit import _process
from raytrace_kit._options import CallSpec
from raytrace_kit._output.context import PARENT_KWARG
from raytrace_kit._worker import boundary, watch
from raytrace_kit._worker.instrument import user_frames_first

__all__ = ["PinnedRunner", "PinnedWorker"]


@dataclass(frozen=True, slots=True)
class PinnedWorker:
    """Where a pinned function's process lives: attach py-spy, debugpy or an IDE to it.

    Attributes:
        node_id: The node, in hex.
        node_ip: The node's IP address.
        pid: The process id.
        worker_id: Ray's worker id, in hex.
        actor_id: The id of the actor that runs the calls, in hex.
    """

    node_id: str
    node_ip: str
    pid: int
    worker_id: str
    actor_id: str


class PinnedRunner:
    """The actor that runs every call of one pinned function, in its own process."""

    def __init__(self, fn: Any, spec: CallSpec) -> None:
        self.fn = fn
        watch.start()  # f.stacks() asks this process's kit thread
        # The spec of the function's own options comes with the constructor, so a restarted
        # runner (max_restarts=-1) has it again; calls name it by the key 0 and do not pickle
        # their settings. Calls with other options (with_debug, profile blocks) send theirs.
        self.specs: dict[int, CallSpec] = {0: spec}

    def call(self, _raytrace_spec: int | CallSpec, *args: Any, **kwargs: Any) -> Any:
        """Run one call (Ray resolved the top-level refs in ``args`` already)."""
        spec = self._spec(_raytrace_spec)
        parent = kwargs.pop(PARENT_KWARG, None)
        try:
            return boundary.run(spec, self.fn, args, kwargs, mode="pinned", parent=parent)
        except BaseException as error:
            user_frames_first(error)  # Ray's text starts at the user's code
            raise

    def call_generator(
        self, _raytrace_spec: int | CallSpec, *args: Any, **kwargs: Any
    ) -> Generator[Any, Any, Any]:
        """Run one call of a generator function: a streaming generator, as a task's."""
        spec = self._spec(_raytrace_spec)
        parent = kwargs.pop(PARENT_KWARG, None)
        calls = boundary.run_generator(spec, self.fn, args, kwargs, mode="pinned", parent=parent)
        try:
            for item in calls:  # noqa: UP028 -- Ray sends into generators
                yield item
        except BaseException as error:
            user_frames_first(error)
            raise

    def _spec(self, key: int | CallSpec) -> CallSpec:
        return key if isinstance(key, CallSpec) else self.specs[key]

    def where(self) -> PinnedWorker:
        """This process's location (asked once, right after creation; see RunnerSlot)."""
        ctx = ray.get_runtime_context()
        return PinnedWorker(
            node_id=ctx.get_node_id(),
            node_ip=ray.util.get_node_ip_address(),
            pid=_process.process_identity().pid,
            worker_id=ctx.get_worker_id(),
            actor_id=ctx.get_actor_id() or "",
        )
