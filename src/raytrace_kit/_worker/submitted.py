"""What a ``call.submit`` record says of one ``.remote()``, gathered where it is made.

The id Ray gave the submitted call (from what ``.remote()`` returned: a ref, refs, a
generator, an actor handle), the calls that produce its argument refs, the line of the
user's code that called ``.remote()``, and its large arguments passed by value
(:mod:`.by_value`). The record itself waits in memory until its batch is written
(:mod:`raytrace_kit._output.submissions`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import ray

from raytrace_kit import _process, _ray_compat
from raytrace_kit._output import submissions, writer
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker import watch
from raytrace_kit._worker.by_value import large_arguments

__all__ = ["MAX_ARG_TASKS", "arg_task_ids", "asked", "prefix", "record", "site", "task_id_of"]

MAX_ARG_TASKS = 64  # argument refs named per record: enough to say what a call waits for

# Frames of Ray and the kit, between the user's .remote() and this record.
_SKIPPED = (str(Path(ray.__file__).parent) + os.sep, str(Path(__file__).parents[1]) + os.sep)


def asked(options: dict[str, Any], *, actor: bool) -> tuple[dict[str, float], str | None]:
    """The resources a call asks to be placed with, in Ray's names, and its scheduling.

    Ray's defaults: a task holds 1 CPU unless told; an actor needs 1 CPU to be placed unless
    told (and holds none while it lives). ``scheduling`` names a node affinity
    (``node:<id>``, `` soft``), a placement group (``placement_group:<id>:<bundle>``) or a
    strategy by name (``SPREAD``).
    """
    resources: dict[str, float] = {}
    cpus = options.get("num_cpus")
    resources["CPU"] = float(1 if cpus is None else cpus)
    for name, key in (("num_gpus", "GPU"), ("memory", "memory")):
        value = options.get(name)
        if value:
            resources[key] = float(value)
    for name, value in (options.get("resources") or {}).items():
        resources[str(name)] = float(value)
    accelerator = options.get("accelerator_type")
    if accelerator:
        resources[f"accelerator_type:{accelerator}"] = 0.001
    if not resources["CPU"]:
        del resources["CPU"]
    return resources, _scheduling(options)


def _scheduling(options: dict[str, Any]) -> str | None:
    strategy = options.get("scheduling_strategy")
    if strategy is None and options.get("placement_group") not in (None, "default"):
        strategy = options["placement_group"]  # the older option
    if strategy is None or isinstance(strategy, str):
        return strategy
    node = getattr(strategy, "node_id", None)
    if node is not None:
        return f"node:{node}" + (" soft" if getattr(strategy, "soft", False) else "")
    group = getattr(strategy, "placement_group", strategy)
    group_id = getattr(group, "id", None)
    if group_id is not None:
        bundle = getattr(strategy, "placement_group_bundle_index", -1)
        return f"placement_group:{group_id.hex()}:{bundle}"
    return type(strategy).__name__


def prefix(
    function: str,
    kind: str,
    options: dict[str, Any],
    actor_class: type | None = None,
    *,
    code_bytes: int | None = None,
) -> str:
    """The members of the submission records of one submitted object (rendered once).

    ``code_bytes``: the size Ray pickled a remote function to, when it is large.
    """
    resources, scheduling = asked(options, actor=actor_class is not None)
    actor = None
    if actor_class is not None:
        is_async = any(
            inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
            for _, member in inspect.getmembers(actor_class, inspect.isfunction)
        )
        concurrency = options.get("max_concurrency") or (1000 if is_async else 1)
        actor = {"max_concurrency": concurrency, "async": is_async}
    return submissions.submit_prefix(
        function, kind, resources, scheduling, actor, code_bytes=code_bytes
    )


def task_id_of(made: Any) -> str | None:
    """The id of the task behind what ``.remote()`` returned (``None`` for no return)."""
    if isinstance(made, ray.ObjectRef):
        return made.task_id().hex()  # type: ignore[no-any-return]
    if isinstance(made, list) and made and isinstance(made[0], ray.ObjectRef):
        return made[0].task_id().hex()  # type: ignore[no-any-return]  # num_returns > 1
    if isinstance(made, ray.ObjectRefGenerator):
        return _ray_compat.generator_task_id(made)
    return None  # num_returns=0


def arg_task_ids(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str] | None:
    """The tasks that produce the refs among the call's top-level arguments, if any."""
    found: list[str] | None = None
    for value in (*args, *kwargs.values()):
        if isinstance(value, ray.ObjectRef):
            if found is None:
                found = []
            if len(found) < MAX_ARG_TASKS:
                found.append(value.task_id().hex())
    return found


def site() -> str | None:
    """``file:line`` of the user's code that called ``.remote()``, or ``None``.

    The first frame outside Ray and the kit, above the caller of :func:`record`.
    """
    frame: FrameType | None = sys._getframe(2)
    for _ in range(12):  # the hooks and proxies between are a handful of frames
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIPPED):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def record(  # noqa: PLR0917 -- positional: one call per .remote() of a debuggable
    prefix: str,
    made: Any,
    actor_id: str | None,
    parent: str | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    task_id: str | None = None,
) -> None:
    """Keep the submission record of one ``.remote()`` that returned ``made``. Never raises."""
    try:
        identity = _process.state.worker_identity or _process.process_identity()
        submissions.record(
            prefix,
            task_id if task_id is not None else task_id_of(made),
            actor_id,
            parent,
            identity,
            site(),
            arg_task_ids(args, kwargs),
            large_arguments(args, kwargs),
        )
        state = worker_state.state
        if state.kit_thread is None:
            watch.start()  # it writes the batch; started once per process
        if not state.cancel_hooked:
            state.cancel_hooked = True
            _hook_cancel()
    except Exception as exc:
        writer.report_failure("submit-record", "cannot record a submission", exc)


_CANCEL_KEY = "cancel#submitted"


def _hook_cancel() -> None:
    """Record each ``ray.cancel`` of a task (``call.cancel``): a cancelled call never starts.

    Without it a cancelled call's submission would look pending forever. Ray's function
    runs as it is, its result and exceptions untouched.
    """
    if _ray_compat.patched(_CANCEL_KEY):
        return
    original = ray.cancel

    @functools.wraps(original)
    def cancel(ref: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(ref, *args, **kwargs)
        with contextlib.suppress(Exception):  # a record lost, never the user's cancel
            task_id = task_id_of(ref)
            if task_id is not None:
                force = bool(kwargs.get("force", args[0] if args else False))
                identity = _process.state.worker_identity or _process.process_identity()
                submissions.record_cancel(task_id, force, identity)
        return result

    _ray_compat.patch(_CANCEL_KEY, ray, "cancel", cancel)
