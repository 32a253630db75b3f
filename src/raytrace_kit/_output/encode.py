"""Rendering events: every field of every event the kit writes is rendered here, and only here.

One event is one JSON object on one line. Every event starts with ``timestamp`` (ISO 8601,
UTC, microseconds, fixed width so that timestamps sort as strings), ``level`` and
``event``. The events and their own fields (docs/events.md says what each means):

- ``call.start``: :func:`call_members` (``call_id``, ``function``, ``kind``, ``mode``,
  ``task_id``, ``actor_id``, ``job_id``, ``node_id``, ``worker_id``, ``pid``, ``attempt``).
- ``call.end``: the same, then :func:`end_members` (``duration_s``, ``status``,
  ``error_type`` and ``error`` on failure, ``rss_bytes``, ``rss_minus_shr_bytes``,
  ``max_rss_bytes``), then for a failed call :func:`locals_members` (``frames_locals``,
  and with ``capture``: ``replay_path`` or ``replay_missing``, ``replay_state_missing``),
  then :func:`profile_members` for profiled calls (``profile_path``, ``profile_block``,
  ``profile_scope``).
- ``call.submit``: written by the process that called ``.remote()``, in batches, rendered
  by :mod:`.submissions` (``submit_line``: ``task_id`` of the submitted call,
  ``function``, ``kind``, ``resources``, ``scheduling``, ``max_concurrency`` and
  ``async`` for an actor, ``actor_id`` of the actor it goes to or creates,
  ``parent_call_id``/``parent_task_id`` of the submitting call (null from the driver),
  the submitter's ``job_id``, ``node_id``, ``worker_id``, ``pid``, the ``site`` in the
  submitter's code, ``arg_task_ids``, the tasks that produce its argument refs, and only
  where large: ``code_bytes``, the function as Ray pickled it, and ``large_args``, its
  arguments of a MiB or more passed by value).
- ``call.stuck``: a running call past its ``stuck_after``: the call's members, then
  :func:`stuck_members` (``running_s``, ``stuck_after_s``, ``report``, ``thread``,
  ``stack``, ``waiting_on``).
- ``serialization.fail``: :func:`serialization_fields` (``function``, ``target``,
  ``context``, ``failures``: name, path, scope, type of each; never values).
- ``profile.skipped``: ``function``, ``profiler``, ``reason``.
- ``debugger.listening`` / ``debugger.attached`` / ``debugger.unavailable``:
  ``debugger``, ``host``, ``port`` (and ``reason``).
- ``instrumentation.error`` (to stderr, see :func:`failure_record`): ``what``,
  ``error_type``, ``error``, ``pid``.
- the user's ``get_logger()`` events: the fields of the running call (or of this
  process outside calls), then whatever the user bound or passed.

The call events are the hot path: their members are rendered from f-strings, with the
parts fixed for a callable or a process rendered once. Other events go through
:func:`event_line`, a JSON encoder that never fails (unknown values are ``repr``'d).
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from raytrace_kit import _process, _registry
from raytrace_kit._output import state as output_state

if TYPE_CHECKING:
    from raytrace_kit._process import ProcessIdentity

from raytrace_kit._output.redact import ARG_CHARS, REDACTED, is_secret_key, shown_arguments
from raytrace_kit._output.tracebacks import KIT_DIR, TRACEBACK_CHARS, clean_text, user_traceback

__all__ = [
    "ARG_CHARS",
    "FIRST_KEYS",
    "KIT_DIR",
    "REDACTED",
    "SCHEMA",
    "TRACEBACK_CHARS",
    "args_members",
    "call_line",
    "call_members",
    "clean_text",
    "end_members",
    "event_line",
    "failure_record",
    "identity_members",
    "is_secret_key",
    "locals_members",
    "members",
    "memory_members",
    "now",
    "parent_members",
    "profile_members",
    "safe_str",
    "second_text",
    "serialization_fields",
    "stamp",
    "stuck_members",
    "user_traceback",
]

SCHEMA = 2  # the schema version every event carries (a missing one means version 1)
FIRST_KEYS = ("timestamp", "level", "event", "schema")
ERROR_CHARS = 2000  # enough for any useful message; bounds one runaway str(exc)
# Each value of an event is capped at this many characters of JSON (documented in
# docs/logging.md): one 5 MB value must not make one 5 MB line. A cut value keeps its first
# 4032 characters and says how many more there were.
VALUE_CHARS = 4096

# One encoder for the process: json.dumps() with options builds a new one per call.
_ENCODER = json.JSONEncoder(default=repr, ensure_ascii=False, separators=(",", ":"))


def second_text(second: int) -> str:
    """The date and time of ``second`` since the epoch, to the second, as timestamps start.

    Formatted once per second: the newest second's text is kept (every line needs one).
    """
    state = output_state.state
    clock = state.clock
    if clock[0] == second:
        return clock[1]
    text = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if second >= clock[0]:  # keep the cache for the newest second
        state.clock = (second, text)
    return text


def stamp(seconds: float) -> str:
    """``seconds`` since the epoch as :func:`now` renders the present time."""
    second = int(seconds)
    return f"{second_text(second)}.{int((seconds - second) * 1e6):06d}+00:00"


def now() -> str:
    """ISO 8601 UTC with microseconds, fixed width, so timestamps sort as strings.

    Equal to ``datetime.now(timezone.utc).isoformat(timespec="microseconds")``.
    """
    return stamp(time.time())


def members(fields: Mapping[str, Any]) -> str:
    """Render ``fields`` as JSON object members (no braces), to splice into a line."""
    return _ENCODER.encode(fields)[1:-1]


def safe_str(value: object) -> str:
    """``str(value)``, or a placeholder naming the type when its ``__str__`` raises."""
    try:
        return str(value)
    except Exception as exc:
        return f"<{type(value).__name__} whose __str__ raised {type(exc).__name__}>"


def identity_members(identity: ProcessIdentity) -> str:
    """The process's ids as members (``job_id``, ``node_id``, ``worker_id``, ``pid``)."""
    state = output_state.state
    cached = state.identity_members
    if cached is not None and cached[0] is identity:
        return cached[1]
    ids = (identity.job_id, identity.node_id, identity.worker_id)
    job, node, worker = (_ENCODER.encode(value) for value in ids)  # null, or a quoted id
    rendered = f'"job_id":{job},"node_id":{node},"worker_id":{worker},"pid":{identity.pid}'
    state.identity_members = (identity, rendered)
    return rendered


_NO_PARENT = '"parent_call_id":null,"parent_task_id":null'


def parent_members(parent: str | None) -> str:
    """``parent_call_id`` and ``parent_task_id`` from a ``parent_token`` (nulls for none)."""
    if not parent:
        return _NO_PARENT
    parent_call, _, parent_task = parent.partition("/")
    task = f'"{parent_task}"' if parent_task else "null"
    return f'"parent_call_id":"{parent_call}","parent_task_id":{task}'


def call_members(
    *,
    call_id: str,
    spec_fragment: str,
    mode: str,
    task_id: str | None,
    actor_id: str | None,
    identity: ProcessIdentity,
    attempt: int | None,
    task_name: str | None = None,
    parent: str | None = None,
) -> str:
    """The members ``call.start`` and ``call.end`` of one call share (rendered once a call).

    ``spec_fragment`` is :func:`members` of ``{"function", "kind"}``, rendered on the
    driver. Ids are hex strings and numbers: safe to place in JSON without escaping; the
    task name is the user's, so it is encoded. ``parent`` is :func:`parent_token` of the
    call during which this one was submitted.
    """
    # Inline conditionals and the cached identity, not helpers: this runs on every call.
    name = "null" if task_name is None else _task_name_json(task_name)
    parents = parent_members(parent) if parent else _NO_PARENT
    task = "null" if task_id is None else f'"{task_id}"'
    actor = "null" if actor_id is None else f'"{actor_id}"'
    ids = output_state.state.identity_members
    return (
        f'"call_id":"{call_id}",{parents},{spec_fragment},"mode":"{mode}",'
        f'"task_id":{task},"task_name":{name},"actor_id":{actor},'
        f"{ids[1] if ids is not None and ids[0] is identity else identity_members(identity)},"
        f'"attempt":{"null" if attempt is None else int(attempt)}'
    )


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=1024)
def _task_name_json(name: str) -> str:
    """A task name as JSON: the user's text, escaped (a handful per process, so cached)."""
    return _ENCODER.encode(name)


def _number(value: int | None) -> str:
    return "null" if value is None else str(value)


def args_members(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], names: tuple[str, ...] = ()
) -> str:
    """``call.start``'s ``args``/``kwargs`` members (``log_args=True``), with a comma first."""
    return "," + members(shown_arguments(args, kwargs, names))


def memory_members(figures: tuple[int | None, int | None, int | None] | None = None) -> str:
    """The process's memory figures as members, starting with a comma (both call events).

    ``figures`` are :func:`raytrace_kit._process.memory_figures`, read now if not given.
    """
    rss, private, max_rss = _process.memory_figures() if figures is None else figures
    if rss is None or private is None or max_rss is None:
        return (
            f',"rss_bytes":{_number(rss)},"rss_minus_shr_bytes":{_number(private)},'
            f'"max_rss_bytes":{_number(max_rss)}'
        )
    return f',"rss_bytes":{rss},"rss_minus_shr_bytes":{private},"max_rss_bytes":{max_rss}'


def end_members(
    duration_s: float,
    error: BaseException | None,
    cpu_s: float | None = None,
    *,
    rss_start: int | None = None,
    figures: tuple[int | None, int | None, int | None] | None = None,
    process_cpu_s: float | None = None,
) -> str:
    """``call.end``'s own members, starting with a comma: outcome, CPU and memory figures.

    ``rss_start`` is the RSS its ``call.start`` recorded: with it, a ``call.end`` alone
    says how much the process grew during the call. ``figures`` as in
    :func:`memory_members`.
    """
    if error is None:
        status = '"status":"ok"'
    else:
        status = members(
            {
                "status": "error",
                "error_type": type(error).__name__,
                "error": clean_text(safe_str(error))[:ERROR_CHARS],
                "traceback": user_traceback(error),
            }
        )
    cpu = "null" if cpu_s is None else f"{cpu_s:.6f}"
    cpu += ',"process_cpu_s":' + ("null" if process_cpu_s is None else f"{process_cpu_s:.6f}")
    return (
        f',"duration_s":{duration_s:.6f},"cpu_s":{cpu},{status}{memory_members(figures)}'
        f',"rss_start_bytes":{_number(rss_start)}'
    )


def locals_members(frames: list[list[Any]], **replay: str | None) -> str:
    """A failed call's ``frames_locals`` and ``replay_*`` members (those set), comma first."""
    fields: dict[str, Any] = {f"replay_{k}": v for k, v in replay.items() if v is not None}
    if frames:  # raytrace_kit._output.locals.frames_locals
        fields = {"frames_locals": frames, **fields}
    return "," + members(fields) if fields else ""


def profile_members(path: os.PathLike[str] | str, block: str | None, scope: str | None) -> str:
    """The members a profiled call's ``call.end`` adds, starting with a comma."""
    fields: dict[str, Any] = {"profile_path": str(path)}
    if block:
        fields["profile_block"] = block
    if scope:
        fields["profile_scope"] = scope
    return "," + members(fields)


def stuck_members(  # noqa: PLR0917 -- its one caller's
    running_s: float,
    stuck_after_s: float,
    report: int,
    thread: str | None,
    stack: list[tuple[str, int, str, str]],
    waiting_on: Mapping[str, Any] | None,
) -> str:
    """``call.stuck``'s own members, starting with a comma (see the module's docstring)."""
    return "," + members(
        {
            "running_s": round(running_s, 3),
            "stuck_after_s": stuck_after_s,
            "report": report,
            "thread": thread,
            "stack": [list(frame) for frame in stack],
            "waiting_on": waiting_on,
        }
    )


def blocked_members(
    held_s: float, thread: str | None, stack: list[tuple[str, int, str, str]]
) -> str:
    """``call.blocked``'s own members, starting with a comma: how long, where."""
    return "," + members(blocked_fields(stack, held_s, thread))


def blocked_fields(
    stack: list[tuple[str, int, str, str]], held_s: float, thread: str | None = None
) -> dict[str, Any]:
    """An event loop held ``held_s`` (at least), at the innermost of ``stack``."""
    where = f"{stack[-1][0]}:{stack[-1][1]}" if stack else None
    return {
        "held_s": round(held_s, 3),
        "where": where,
        "thread": thread,
        "stack": [list(frame) for frame in stack],
    }


def call_line(event: str, level: str, call_fragment: str, tail: str = "") -> bytes:
    """One ``call.start``/``call.end`` line: same shape and order as :func:`event_line`."""
    line = (
        f'{{"timestamp":"{now()}","level":"{level}","event":"{event}","schema":{SCHEMA},'
        f"{call_fragment}{tail}}}\n"
    )
    return line.encode("utf-8", "backslashreplace")


def event_line(fields: Mapping[str, Any]) -> bytes:
    """Any other event as one line: the first keys first, then the rest in their order.

    Never raises: a value JSON cannot hold is written as its ``repr``; a value whose
    ``repr`` raises, a cyclic container or an int too long to print becomes a placeholder
    naming its type; a value longer than :data:`VALUE_CHARS` is cut, saying so.
    """
    ordered = {key: fields.get(key) for key in FIRST_KEYS}
    ordered.update((k, v) for k, v in fields.items() if k not in ordered)
    ordered["schema"] = SCHEMA  # readers tell versions apart by it: never the caller's
    try:
        text = _ENCODER.encode(ordered)
    except Exception:
        text = ""
    if not text or len(text) > VALUE_CHARS:  # a value may be too long or unrenderable
        text = "{" + ",".join(_member(key, value) for key, value in ordered.items()) + "}"
    return text.encode("utf-8", "backslashreplace") + b"\n"


def _member(key: object, value: object) -> str:
    name = _ENCODER.encode(key if isinstance(key, str) else safe_str(key))
    try:
        rendered = _ENCODER.encode(value)
    except Exception as exc:
        placeholder = f"<unrenderable {type(value).__name__}: {type(exc).__name__}>"
        return f"{name}:{_ENCODER.encode(placeholder)}"
    if len(rendered) > VALUE_CHARS:
        # A string keeps its first characters; anything else its first characters of JSON.
        text = value if isinstance(value, str) else rendered
        shown = text[: VALUE_CHARS - 64]
        rendered = _ENCODER.encode(f"{shown}... <cut: {len(text) - len(shown)} more characters>")
    return f"{name}:{rendered}"


def serialization_fields(
    function: str, target: str, context: str, failures: list[tuple[str, tuple[str, ...], str, str]]
) -> dict[str, Any]:
    """The fields of ``serialization.fail``: each failure's name, path, scope and type."""
    return {
        "function": function,
        "target": target,
        "context": context,
        "failures": [
            {"name": name, "path": list(path), "scope": scope, "type_name": type_name}
            for name, path, scope, type_name in failures
        ],
    }


def failure_record(what: str, error: BaseException) -> str:
    """The ``instrumentation.error`` line written to stderr when events cannot be written."""
    record = {
        "timestamp": now(),
        "level": "warning",
        "event": "instrumentation.error",
        "schema": SCHEMA,
        "what": what,
        "error_type": type(error).__name__,
        "error": safe_str(error)[:ERROR_CHARS],
        "pid": os.getpid(),
    }
    return json.dumps(record) + "\n"
