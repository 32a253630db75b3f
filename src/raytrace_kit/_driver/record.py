"""The driver's own record: the run, and each ``ray.get``/``ray.wait`` the user's code blocks in.

Written to ``driver-<node>-<pid>.jsonl`` in the session's log dir (beside the workers'
``events-*`` files, which readers of calls list; this one is the report's alone):

- ``run.start`` / ``run.end``: the script, how many arguments (their values only with
  ``log_args``), when, and how it ended;
- ``driver.get`` / ``driver.wait``: a wait that blocked 10 ms or more (or raised): where
  in the user's code (file, line, function), when it started, how long it blocked, on how
  many refs and which tasks, and how many calls the driver had submitted since its
  previous get or wait returned (one, each time, at one line: the ray.get-in-a-loop
  pattern);
- ``driver.waits``: the shorter waits, summed per line of code (how many, how long in all,
  the longest, how many were gets of the one call just submitted), written at least every
  second and at the end.

Only calls made by the user's code are recorded (those of Ray's libraries and of the kit
are not); Ray's own functions run as they are, their results and exceptions untouched.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray

from raytrace_kit import _process, _ray_compat, _registry
from raytrace_kit._output import encode, paths, redact, writer
from raytrace_kit._output import state as output_state
from raytrace_kit._output.writer import EventWriter
from raytrace_kit._worker import held

__all__ = [
    "FLUSH_S", "MAX_TASK_IDS", "RECORD_BLOCKED_S", "finish", "flush", "start", "submitted", "write",
]  # fmt: skip

MAX_TASK_IDS = 10_000  # per record: which calls a get waited on, enough to find its straggler
RECORD_BLOCKED_S = 0.01  # a wait this long gets a record of its own; shorter ones are summed
FLUSH_S = 1.0  # the sums are written at least this often (a killed driver loses less)
_GET_KEY, _WAIT_KEY = "get#driver", "wait#driver"
_METHOD_KEY = "actor.ActorMethod._remote#driver"


class _State:
    """What the driver's record keeps; a reset forgets it (the hooks go with the patches)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.lock = threading.Lock()
        self.run: dict[str, Any] | None = None  # run.start's fields, once started
        self.writer: EventWriter | None = None  # the driver file, once Ray is up
        self.path: Path | None = None
        self.identity: object = None  # the Ray connection the file is of (a new one: a new file)
        self.count = 0  # calls submitted by this process
        self.count_at_return = 0  # ...as the last get or wait returned
        self.ended = False
        self.sites: dict[tuple[str, int, str], _Site] = {}  # short waits, by line of code
        self.flushed = time.perf_counter()
        self.user_module: Callable[[str | None], bool] = _always


def _always(_module: str | None) -> bool:
    return True


state = _State()
_registry.register(state.clear, state.clear, layer=_registry.LOCAL)


def start(
    user_module: Callable[[str | None], bool] | None = None,
    script: str | None = None,
    arguments: list[str] | None = None,
    *,
    log_args: bool = False,
    at_exit: bool = True,
) -> None:
    """Begin the run's record and hook ``ray.get``/``ray.wait`` (idempotent).

    Args:
        user_module: Whether a module name is the user's code (whose calls are recorded).
        script: What ran (``sys.argv[0]`` if not given).
        arguments: Its arguments (``sys.argv[1:]`` if not given): counted; their values
            are written only with ``log_args``.
        log_args: Write the arguments' values.
        at_exit: Write ``run.end`` at interpreter exit (the CLI writes it itself, with the
            exit status).
    """
    if user_module is not None:
        state.user_module = user_module
    if state.run is not None:
        return
    argv = list(sys.argv[1:] if arguments is None else arguments)
    run: dict[str, Any] = {
        "script": script if script is not None else (sys.argv[0] if sys.argv else ""),
        "arg_count": len(argv),
        "cwd": os.getcwd(),
        "started": time.time(),
        "pid": os.getpid(),
    }
    if log_args:  # the user asked; secret-looking options' values still left out
        run["args"] = redact.shown_argv(argv)
    state.run = run
    for key, name in ((_GET_KEY, "get"), (_WAIT_KEY, "wait")):
        if not _ray_compat.patched(key):
            _ray_compat.patch(key, ray, name, _hook(getattr(ray, name), f"driver.{name}"))
    if not _ray_compat.patched(_METHOD_KEY):
        cls = _ray_compat.actor_method_class()
        original = _ray_compat.actor_method_submit(cls)
        _ray_compat.patch(_METHOD_KEY, cls, "_remote", _counting(original))
    held.hook_put()  # each ray.put's line, for the objects its refs hold (store_watch)
    if at_exit:
        atexit.register(_finish_at_exit)


def submitted() -> None:
    """Count one call submitted by this process (the hooks on Ray's ``_remote`` call it)."""
    state.count += 1


def _counting(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _remote(*args: Any, **kwargs: Any) -> Any:
        state.count += 1
        return original(*args, **kwargs)

    return _remote


def _caller_is_user(frame: Any) -> bool:
    return state.run is not None and state.user_module(frame.f_globals.get("__name__"))


def _hook(original: Callable[..., Any], event: str) -> Callable[..., Any]:
    """Ray's ``ray.get`` or ``ray.wait``, timed where the user's code calls it."""

    @functools.wraps(original)
    def hooked(refs: Any, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        if not _caller_is_user(caller):
            return original(refs, *args, **kwargs)
        clock = time.perf_counter()
        try:
            result = original(refs, *args, **kwargs)
        except BaseException as error:
            _waited(event, caller, refs, clock, error, None)
            _hide_this_frame(error)
            raise
        _waited(event, caller, refs, clock, None, result)
        return result

    return hooked


def _hide_this_frame(error: BaseException) -> None:
    """Leave the hook's own frame out of the traceback: the user sees Ray's, as plain."""
    tb = error.__traceback__
    if tb is not None and tb.tb_next is not None:
        error.__traceback__ = tb.tb_next


class _Site:
    """The short waits at one line of code since the last flush (see :func:`_waited`)."""

    __slots__ = ("blocked", "count", "first", "function", "longest", "serial", "serial_blocked")

    def __init__(self, function: str, first: float) -> None:
        self.function, self.first = function, first
        self.count = self.serial = 0
        self.blocked = self.longest = self.serial_blocked = 0.0


def _waited(  # noqa: PLR0917 -- one line per hook, on its hot path
    event: str,
    caller: Any,
    refs: Any,
    clock: float,
    error: BaseException | None,
    result: Any,
) -> None:
    """Count one wait of the user's code; never raises.

    A wait that blocked :data:`RECORD_BLOCKED_S` or more, or raised, gets a record of its
    own (which tasks it waited on: the straggler finding, the timeline). Shorter ones are
    summed per line of code, in memory, and written as ``driver.waits`` at most every
    :data:`FLUSH_S` and at the end: one wait costs a few dictionary operations.
    """
    now = time.perf_counter()
    blocked = now - clock
    submitted = state.count - state.count_at_return
    state.count_at_return = state.count
    try:
        if blocked >= RECORD_BLOCKED_S or error is not None:
            _write(_wait_line(event, caller, refs, blocked, submitted, error, result))
        else:
            key = (caller.f_code.co_filename, caller.f_lineno, event)
            site = state.sites.get(key)
            if site is None:
                code = caller.f_code
                site = state.sites[key] = _Site(getattr(code, "co_qualname", code.co_name), clock)
            site.count += 1
            site.blocked += blocked
            site.longest = max(site.longest, blocked)
            one = len(refs) == 1 if isinstance(refs, list | tuple) else True
            if submitted == 1 and one and event == "driver.get":
                site.serial += 1
                site.serial_blocked += blocked
        if now - state.flushed >= FLUSH_S:
            flush()
    except Exception as exc:
        writer.report_failure("driver-record", "cannot record the driver's wait", exc)


def _wait_line(  # noqa: PLR0917 -- its one caller's
    event: str,
    caller: Any,
    refs: Any,
    blocked: float,
    submitted: int,
    error: BaseException | None,
    result: Any,
) -> bytes:
    """One ``driver.get``/``driver.wait`` record, the task ids last (never cut short)."""
    count, ids = _task_ids(refs)
    code = caller.f_code
    fields: dict[str, Any] = {
        "timestamp": encode.now(),
        "level": "info",
        "event": event,
        "started": _iso(time.time() - blocked),
        "blocked_s": round(blocked, 6),
        "file": code.co_filename,
        "line": caller.f_lineno,
        "function": getattr(code, "co_qualname", code.co_name),
        "refs": count,
        "submitted": submitted,
    }
    if error is not None:
        fields["error_type"] = type(error).__name__
    elif result is not None and event == "driver.wait":
        fields["ready"] = len(result[0])
    line = encode.event_line(fields)
    return line[:-2] + b',"task_ids":[' + ",".join(f'"{i}"' for i in ids).encode() + b"]}\n"


def _task_ids(refs: Any) -> tuple[int, list[str]]:
    """How many refs, and the tasks that produce them (an ObjectRef's id starts with it)."""
    if not isinstance(refs, list | tuple):
        refs = [refs]
    ids = []
    for ref in refs[:MAX_TASK_IDS]:
        hexed = getattr(ref, "hex", None)
        if hexed is not None:
            with contextlib.suppress(Exception):
                ids.append(hexed()[:48])
    return len(refs), ids


def flush() -> None:
    """Write the short waits summed per line since the last flush (``driver.waits``)."""
    sites, state.sites = state.sites, {}
    now = time.perf_counter()
    state.flushed = now
    if not sites:
        return
    wall = time.time() - now  # perf_counter to wall-clock time
    lines = []
    for (file, line, event), site in sites.items():
        fields = {
            "timestamp": encode.now(), "level": "info", "event": "driver.waits",
            "waits": event, "since": _iso(wall + site.first), "file": file, "line": line,
            "function": site.function, "count": site.count,
            "blocked_s": round(site.blocked, 6), "longest_s": round(site.longest, 6),
            "serial": site.serial, "serial_blocked_s": round(site.serial_blocked, 6),
        }  # fmt: skip
        lines.append(encode.event_line(fields))
    _write(b"".join(lines))


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="microseconds")


def _write(line: bytes) -> None:
    """Append to the driver file, ``run.start`` first; nothing before Ray is up."""
    record = state.writer
    if (
        record is not None
        and ray.is_initialized()
        and _process.process_identity() is not state.identity
    ):
        record = state.writer = None  # another ray.init(): its session gets a file of its own
    if record is None:
        with state.lock:
            record = state.writer or _open()
        if record is None:
            return
    try:
        record.write(line)
    except Exception as exc:
        writer.report_failure("driver-record", "cannot write the driver's record", exc)


write = _write  # the driver's other records (store.held) go to its file the same way


def _open() -> EventWriter | None:
    """The driver file in this session's log dir, with ``run.start`` written first."""
    run = state.run
    if run is None:
        return None
    directory: Path | None = output_state.state.last_ray_log_dir
    node: str | None = None
    if ray.is_initialized():
        directory = paths.log_dir()
        context = ray.get_runtime_context()
        node = context.get_node_id()
        run["job_id"] = context.get_job_id()  # this connection's job
        state.identity = _process.process_identity()
    if directory is None:  # Ray never ran (after ray.shutdown(): the session it used)
        return None
    path = directory / paths.driver_file_name(node, os.getpid())
    made = output_state.state.writers.setdefault(path, EventWriter(path))
    fields = {"timestamp": _iso(run["started"]), "level": "info", "event": "run.start"}
    fields.update((k, v) for k, v in run.items() if k != "started")
    made.write(encode.event_line(fields))
    state.writer, state.path = made, path
    return made


def finish(exit_status: int | None = None, error_type: str | None = None) -> None:
    """Write ``run.end`` (once): how the program ended. Never raises."""
    if state.ended or state.run is None:
        return
    state.ended = True
    fields: dict[str, Any] = {"timestamp": encode.now(), "level": "info", "event": "run.end"}
    fields["duration_s"] = round(time.time() - state.run["started"], 6)
    if exit_status is not None:
        fields["exit_status"] = exit_status
    if error_type is not None:
        fields["error_type"] = error_type
    with contextlib.suppress(Exception):
        flush()
        _write(encode.event_line(fields))


def _finish_at_exit() -> None:
    """At exit of a program that called instrument() itself: its status is not known."""
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    finish(None if last is None else 1, None if last is None else type(last).__name__)
