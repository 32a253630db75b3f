"""``explain(exc)``: what an exception from ``ray.get`` means, in plain words, and what to do.

Each Ray error says what happened in Ray's terms; the likely causes, what to check and the
fix come from Ray's own debugging guides (``kinds.py``, one answer per kind). When the
failing call's events are in the session, the explanation links that call: its function,
node, process, duration, memory and traceback, and why its process died.
"""

from __future__ import annotations

import re
from dataclasses import replace

from raytrace_kit import exceptions as kit_errors
from raytrace_kit._output.schema import Call
from raytrace_kit._reports.explain import error_text, linking
from raytrace_kit._reports.explain.data import explain_data_text
from raytrace_kit._reports.explain.deaths import WorkerDeath
from raytrace_kit._reports.explain.explanation import Explanation, reproduce
from raytrace_kit._reports.explain.kinds import by_type
from raytrace_kit._reports.reading.session import Session, current_session
from raytrace_kit.exceptions import EventsNotFoundError

__all__ = ["Explanation", "explain", "explain_task"]


def _cause_type(exc: BaseException) -> type:
    """The user's exception type behind a ``RayTaskError`` (or its dual instance)."""
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return type(cause)
    from ray.exceptions import RayError  # noqa: PLC0415

    return next(
        (base for base in type(exc).__mro__[1:] if not issubclass(base, RayError)),
        type(exc),
    )


def explain(exc: BaseException | str, session: Session | None = None) -> Explanation:
    """Say what an error from ``ray.get`` (or the kit) means, and what to do about it.

    Args:
        exc: The exception: any Ray error (``RayTaskError`` of any cause, out of memory,
            worker or actor death, lost objects, timeouts, system errors) or the kit's.
            Or its text, as printed (``raytrace-kit explain`` reads it from stdin).
        session: Where to look for the failing call's events (default: this process's
            current session).

    Returns:
        ``str()`` gives plain text; notebooks render ``_repr_html_()``.
    """
    session = session or current_session()
    if isinstance(exc, str):
        return _explain_text(exc, session)
    from ray.exceptions import RayTaskError  # noqa: PLC0415 -- Ray loads only to explain

    text = str(exc)
    if isinstance(exc, RayTaskError):
        function, pid = linking.task_identity(text)
        cause = getattr(exc, "cause", None)
        message = str(cause) if cause is not None else None
        return _task_error(_cause_type(exc).__name__, function, pid, message, session=session)
    explained = by_type(type(exc), text, bool(getattr(exc, "_actor_init_failed", False)))
    return _with_task(_with_death(explained, type(exc), text, session), exc, session)


def _task_error(
    cause: str,
    function: str | None,
    pid: int | None,
    message: str | None,
    *,
    session: Session | None,
    call: Call | None = None,
) -> Explanation:
    if call is None:
        call = linking.failing_call(session, cause, function, pid, message)
    where = f" in {call.function}" if call is not None else (f" in {function}" if function else "")
    pid = pid or (call.pid if call is not None else None)
    return Explanation(
        f"{cause} in a task",
        f"Your code raised {cause}{where}"
        + (f" (pid {pid})" if pid else "")
        + "; ray.get re-raised it here.",
        check=("the traceback below: the last frame is where it was raised",),
        fix=reproduce(call),
        call=call,
    )


def _with_task(
    explained: Explanation, error: BaseException | str, session: Session | None
) -> Explanation:
    """Name the task Ray's error carries (a cancellation, an OOM kill, a lost object's)."""
    task = error_text.task_id_of(error)
    if task is None or explained.call is not None:
        return explained
    call = linking.task_call(session, task)
    if call is None:
        return replace(
            explained,
            what=f"{explained.what} Ray's error names task {task[:16]}.",
            check=(f"raytrace-kit explain --task {task[:16]}", *explained.check),
        )
    return replace(
        explained,
        what=f"{explained.what} It was task {task[:16]}: {call.function} (pid {call.pid}).",
        call=call,
    )


def _with_death(  # noqa: PLR0911 -- one link per kind of death
    explained: Explanation, kind: type, text: str, session: Session | None
) -> Explanation:
    """For a death: the call it cut off and why Ray says its worker died, when known."""
    from ray import exceptions as ray_errors  # noqa: PLC0415

    if issubclass(kind, ray_errors.OutOfMemoryError):
        worker = linking.oom_worker(text)
        dead = [c for c in linking.interrupted_calls(session) if worker and c.worker_id == worker]
        return _died(explained, dead[-1], session) if dead else explained
    if issubclass(kind, ray_errors.RayActorError) and not issubclass(
        kind, ray_errors.ActorUnavailableError
    ):
        actor = linking.actor_of(text)
        call = linking.actor_call(session, actor) if actor else None
        if call is not None:
            return _died(explained, call, session, linking.text_death(text))
        death = linking.text_death(text)
        return _known(explained, death) if death is not None else explained
    if not issubclass(kind, ray_errors.WorkerCrashedError):
        return explained
    dead = linking.interrupted_calls(session)
    if len(dead) == 1:
        return _died(explained, dead[0], session)
    if not dead:
        return explained
    latest = dead[-5:]
    deaths = linking.deaths_of(latest, session)  # Ray's logs read once for the five
    listed = tuple(
        f"{c.function} (pid {c.pid}, started {c.started[11:23]}): "
        + (death.cause if (death := deaths.get(c.call_id)) else "no Ray record")
        for c in reversed(latest)
    )
    return replace(
        explained,
        what=explained.what + f" Ray's error does not say which task it was; {len(dead)} "
        "calls of this session were cut off by a dying process (the latest first, under Check).",
        check=listed + explained.check,
    )


def _died(
    explained: Explanation,
    call: Call,
    session: Session | None,
    fallback: WorkerDeath | None = None,
) -> Explanation:
    death = linking.death_of(call, session) or fallback
    known = _known(explained, death) if death is not None else explained
    return replace(known, call=call)


def _known(explained: Explanation, death: WorkerDeath) -> Explanation:
    """An explanation whose cause is known: that cause and its fix, not the usual list."""
    check = {
        "crash": "the worker's .err file in the session's logs directory: Python's stack at "
        "the crash (faulthandler)",
        "killed": "dmesg on the node for 'Out of memory: Killed process <pid>' (the kernel's "
        "OOM killer) ; else something killed it or called os._exit()",
        "oom": "the node's memory use above, and each call's rss_growth_bytes",
    }.get(death.kind)
    if death.kind == "killed" and death.little_memory:
        check = (
            "dmesg on the node first (the call may have grown after its start), then who "
            "sent the signal: the scheduler's logs; os._exit( in the code"
        )
    return replace(
        explained,
        what=f"{explained.what} Ray's records: the process {death.cause}.",
        causes=(death.cause,),
        check=(check,) if check else explained.check,
        fix=(death.fix,),
        details={"exit_type": death.exit_type, "ray_detail": death.detail},
    )


# "ray.exceptions.RayTaskError(ValueError): ray::parse_row() (pid=12, ip=...)", or a
# plain "WorkerCrashedError: ...", in a pasted traceback or error message.
_NAMED = re.compile(
    r"(?:\b(?:ray\.exceptions|raytrace_kit\.exceptions)\.)?\b(?P<name>[A-Z]\w*(?:Error|Exception))"
    r"(?:\((?P<cause>\w+)\))?:"
)
# The last line of a traceback: "ValueError: bad row 5" (or "pkg.errors.BadRow: ...").
_RAISED = re.compile(r"^(?:[\w.]+\.)?(?P<name>[A-Za-z_]\w*): (?P<message>.*)$", re.MULTILINE)


def _explain_text(text: str, session: Session | None) -> Explanation:
    """Explain an error from its printed text: the first Ray or kit error it names."""
    from ray import exceptions as ray_errors  # noqa: PLC0415

    text = linking.plain(text)
    data = explain_data_text(text)  # Ray Data's errors speak of its machinery: name the UDF
    if data is not None:
        return data
    for match in _NAMED.finditer(text):
        name = match["name"]
        kind = getattr(ray_errors, name, None) or getattr(kit_errors, name, None)
        if not isinstance(kind, type) or not issubclass(kind, BaseException):
            continue
        message = text[match.end() :].strip()
        if issubclass(kind, ray_errors.RayTaskError):
            return _text_task_error(message, match["cause"], session)
        init_failed = "__init__" in message or "creation task" in message
        return _with_death(by_type(kind, message, init_failed), kind, message, session)
    if "ray::" in text:  # str(e) of a task error: "ray::f() (pid=...)", its traceback, cause
        return _text_task_error(text, None, session)
    name = error_text.class_of_message(text)  # str(e) as programs log it: no class name
    kind = getattr(ray_errors, name, None) if name else None
    if isinstance(kind, type):
        explained = by_type(kind, text, "__init__" in text or "creation task" in text)
        return _with_task(_with_death(explained, kind, text, session), text, session)
    return Explanation(
        "Not a Ray error",
        "The text names no Ray or raytrace_kit error.",
        check=("paste the whole error as printed, including its last lines",),
    )


def _text_task_error(text: str, cause: str | None, session: Session | None) -> Explanation:
    function, pid = linking.task_identity(text)
    raised = list(_RAISED.finditer(text))
    last = raised[-1] if raised else None
    cause = cause or (last["name"] if last else None) or "an exception"
    message = last["message"] if last and last["name"] == cause else None
    return _task_error(cause, function, pid, message, session=session)


def explain_task(task_id: str, session: Session) -> Explanation:
    """Explain what happened to a task, by (a prefix of) its Ray task id, from the session.

    Raises:
        EventsNotFoundError: the session has no call of that task.
        InvalidValueError: the prefix matches calls of several tasks.
    """
    calls = [c for c in session.calls() if c.task_id and c.task_id.startswith(task_id)]
    if not calls:
        msg = f"no call of task {task_id!r} in {session.root}"
        raise EventsNotFoundError(msg)
    tasks = sorted({c.task_id for c in calls if c.task_id})
    if len(tasks) > 1:
        shown = ", ".join(tasks[:5]) + (" ..." if len(tasks) > 5 else "")
        msg = f"task id {task_id!r} matches {len(tasks)} tasks ({shown}): give more of it"
        raise kit_errors.InvalidValueError(msg)
    call = calls[-1]  # the last attempt
    attempts = f" (attempt {call.attempt}, of {len(calls)} recorded)" if len(calls) > 1 else ""
    if call.status == "ok":
        return Explanation(
            "Succeeded",
            f"{call.function} succeeded{attempts} in {call.duration_s or 0:.3f} s.",
            call=call,
        )
    if call.status == "error":
        cause = call.error_type or "an exception"
        explained = _task_error(cause, None, call.pid, call.error, session=session, call=call)
        return replace(explained, what=explained.what + attempts)
    from ray.exceptions import WorkerCrashedError  # noqa: PLC0415

    if linking.still_running(call.pid, call.started):
        return Explanation(
            "Running",
            f"{call.function} has started and not ended: its process is alive.",
            check=("where it is now: raytrace_kit.stacks() for a debuggable actor",),
            call=call,
        )
    return _died(by_type(WorkerCrashedError, ""), call, session)
