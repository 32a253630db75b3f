"""Which recorded call an error came from, and whether a call without an end still runs.

Ray's errors say little about their call: a ``RayTaskError`` prints ``ray::parse()
(pid=3882, ip=...)`` and the cause; a dead actor's error names the actor and the worker's
exit; an out-of-memory error names the worker it killed; a ``WorkerCrashedError`` names
nothing. These helpers match what the error does say against the session's calls, and
link nothing rather than guess: a wrong call, with its traceback, is worse than none.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.explain.deaths import WorkerDeath, find_ray_logs, worker_deaths
from raytrace_kit._reports.reading.columns import seconds

if TYPE_CHECKING:
    from raytrace_kit._reports.reading.session import Session

__all__ = [
    "actor_call",
    "death_of",
    "deaths_of",
    "failing_call",
    "interrupted_calls",
    "plain",
    "still_running",
    "task_identity",
    "text_death",
]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TASK = re.compile(r"ray::(?P<function>[\w.<>]+)\(\)(?: \(pid=(?P<pid>\d+))?")
_ACTOR = re.compile(r"actor_id: (?P<actor>[0-9a-f]+)")
_EXIT = re.compile(
    r"Worker exit type: (?P<type>[A-Z_]+) Worker exit detail: (?P<detail>.*)", re.DOTALL
)
_OOM_WORKER = re.compile(
    r"pid=(?P<pid>\d+), actual memory used=[\d.]+GB, worker ID=(?P<w>[0-9a-f]+)"
)


def plain(text: str) -> str:
    """``text`` without terminal colours (Ray colours its error output)."""
    return _ANSI.sub("", text)


def task_identity(text: str) -> tuple[str | None, int | None]:
    """The function (``parse`` or ``Class.method``) and pid an error's text names."""
    match = _TASK.search(plain(text))
    if match is None:
        return None, None
    return match["function"], int(match["pid"]) if match["pid"] else None


def _same_function(recorded: str, short: str) -> bool:
    """``pkg.stages.process`` is ``process``; ``mod.Counter.add`` is ``Counter.add``."""
    return recorded == short or recorded.endswith("." + short)


def _first_line(text: str) -> str:
    return (plain(text).strip().splitlines() or [""])[0].strip()


def failing_call(
    session: Session | None,
    cause: str,
    function: str | None,
    pid: int | None,
    message: str | None,
) -> Call | None:
    """The recorded call that raised, the latest that matches what the error says.

    The error type must match, and the function, pid and message where the error names
    them. ``None`` when only the type is known (several calls may have raised it) or no
    call matches.
    """
    if session is None or (function is None and pid is None and not message):
        return None
    candidates = [
        call
        for call in session.calls(status="error")
        if call.error_type == cause
        and (pid is None or call.pid == pid)
        and (function is None or _same_function(call.function, function))
    ]
    if message:
        wanted = _first_line(message)
        exact = [c for c in candidates if _first_line(c.error or "") == wanted]
        if exact or (function is None and pid is None):
            return exact[-1] if exact else None
    return candidates[-1] if candidates else None


def interrupted_calls(session: Session | None) -> list[Call]:
    """The session's calls without an end whose process is not running any more."""
    if session is None:
        return []
    return [c for c in session.calls(status="interrupted") if not still_running(c.pid, c.started)]


def task_call(session: Session | None, task_id: str) -> Call | None:
    """The last recorded attempt of a task, by its id (or a prefix of it)."""
    if session is None:
        return None
    calls = [c for c in session.calls() if c.task_id and c.task_id.startswith(task_id)]
    return calls[-1] if calls else None


def actor_call(session: Session | None, actor_id: str) -> Call | None:
    """The last call an actor was running when its process died."""
    dead = [c for c in interrupted_calls(session) if c.actor_id == actor_id]
    return dead[-1] if dead else None


def oom_worker(text: str) -> str | None:
    """The worker id an out-of-memory error's text names (the one Ray killed)."""
    match = _OOM_WORKER.search(plain(text))
    return match["w"] if match else None


def actor_of(text: str) -> str | None:
    match = _ACTOR.search(plain(text))
    return match["actor"] if match else None


def text_death(text: str) -> WorkerDeath | None:
    """A worker's exit as an actor's error describes it (``Worker exit type: ...``)."""
    match = _EXIT.search(plain(text))
    if match is None:
        return None
    return WorkerDeath("", "", match["type"], match["detail"].strip())


def death_of(call: Call, session: Session | None) -> WorkerDeath | None:
    """Ray's record of the exit of the worker that ran ``call``, weighed by its memory."""
    return deaths_of([call], session).get(call.call_id)


def deaths_of(calls: list[Call], session: Session | None) -> dict[str, WorkerDeath]:
    """:func:`death_of` for several calls, by call id: Ray's logs are read once for all."""
    wanted = [call for call in calls if call.worker_id]
    if session is None or not wanted:
        return {}
    logs = find_ray_logs(session.root)
    if logs is None:
        return {}
    deaths = worker_deaths(logs, [call.worker_id or "" for call in wanted])
    return {
        call.call_id: replace(death, held=call.rss_start_bytes)
        for call in wanted
        if (death := deaths.get(call.worker_id or "")) is not None
    }


def still_running(pid: int | None, started: str) -> bool:
    """Whether the process of a call without an end is alive here, and was at its start.

    Linux only (``/proc``): the pid is alive, is a Ray worker or a Python process, and
    started before the call did (so a later process that reuses the pid does not count).
    A pid of another machine may match one here by chance; Ray's record of a death wins.
    """
    if pid is None or not started:
        return False
    proc = Path("/proc", str(pid))
    try:
        stat = (proc / "stat").read_text()
        command = (proc / "cmdline").read_bytes()
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    if b"ray::" not in command and b"python" not in command.lower():
        return False
    try:
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start, in clock ticks
        began = boot + ticks / os.sysconf("SC_CLK_TCK")
        return began <= seconds(started) + 1.0
    except (ValueError, IndexError, OSError):
        return False
