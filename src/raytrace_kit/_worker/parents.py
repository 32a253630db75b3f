"""Which call started which, and the submission records of debuggable actors' methods.

The submitting call's id travels with the calls it submits, and the submission of a
debuggable actor's method is recorded where it is made.

A debuggable task or actor submitted during an instrumented call gets the caller's
``parent_token()`` as one extra keyword argument (``_raytrace_parent``), which the
instrumented code takes out before the user's code sees the arguments: ``call.start``
then carries ``parent_call_id`` and ``parent_task_id``. Submissions outside any call
pass nothing, so a driver's submissions cost one context-variable read.

Tasks and actors are submitted through the kit's proxies (:mod:`raytrace_kit._driver`);
actor *methods* are called on Ray's own handles, so Ray's ``ActorMethod._remote`` is
wrapped once per process, on the first instrumented call: it adds the keyword only
inside a call and only for methods that take it (those of debuggable actors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._output import writer
from raytrace_kit._output.context import CURRENT_CALL, PARENT_KWARG, ActiveCall, parent_token
from raytrace_kit._worker import state as worker_state

__all__ = ["install_method_hook", "submitting_call", "with_parent"]

_HOOK_KEY = "actor.ActorMethod._remote#parent"


def submitting_call() -> ActiveCall | None:
    """The call a submission made now belongs to: this thread's, else the worker's only one.

    A thread that user code starts inside a call does not inherit the call's context
    (Python copies no context into new threads); in a Ray worker running exactly one call,
    that call is the one it works for. With several running (a threaded actor), or on the
    driver, where threads come from anywhere, no call is named.
    """
    call = CURRENT_CALL.get()
    if call is None:
        running = worker_state.state.running_calls
        if len(running) == 1 and _ray_compat.is_worker_process():
            for only in running.values():
                return only if only.mode != "local" else None
    return call


def with_parent(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` plus the current call's token, or ``kwargs`` itself outside calls."""
    parent = submitting_call()
    if parent is None:
        return kwargs
    return {**kwargs, PARENT_KWARG: parent_token(parent)}


def _record(  # noqa: PLR0917 -- the hook's own values, passed through
    method: Any, function: str, made: Any, token: str | None, args: Any, kwargs: Any
) -> None:
    # Imported at the first record: every worker hooks its method calls at its first
    # call, and most never call a debuggable actor's method.
    from raytrace_kit._worker import submitted  # noqa: PLC0415

    try:
        actor_id = _ray_compat.actor_id_of(_ray_compat.actor_of_method(method))
        submitted.record(_method_prefix(function), made, actor_id, token, tuple(args), kwargs)
    except Exception as exc:
        writer.report_failure("submit-record", "cannot record a submission", exc)


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=1024)
def _method_prefix(function: str) -> str:
    from raytrace_kit._worker import submitted  # noqa: PLC0415 -- as in _record

    return submitted.prefix(function, "actor_method", {"num_cpus": 0})


def install_method_hook() -> None:
    """Wrap ``ActorMethod._remote`` for debuggable actors' methods: parents and records.

    A method call made inside a call carries its token; a logged method's call leaves a
    ``call.submit`` record.

    Installed in a worker at its first instrumented call, and in a driver when it creates
    a debuggable actor.
    """
    if _ray_compat.patched(_HOOK_KEY):
        return
    cls = _ray_compat.actor_method_class()
    original: Callable[..., Any] = _ray_compat.actor_method_submit(cls)

    @functools.wraps(original)
    def submit(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        keyword = _ray_compat.keyword_of(self, PARENT_KWARG)
        if keyword is None:  # not a debuggable actor's method: Ray's own, untouched
            return original(self, args, kwargs, **options)
        parent = submitting_call()
        token = None
        if parent is not None:
            token = parent_token(parent)
            kwargs = {**(kwargs or {}), PARENT_KWARG: token}
        made = original(self, args, kwargs, **options)
        if keyword.default is not None:  # its calls are logged: so is this submission
            _record(self, keyword.default, made, token, args or (), kwargs or {})
        return made

    with worker_state.state.lock:  # one installer at a time
        if not _ray_compat.patched(_HOOK_KEY):
            _ray_compat.patch(_HOOK_KEY, cls, "_remote", submit)
