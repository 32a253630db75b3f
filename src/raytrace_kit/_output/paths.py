"""Where raytrace_kit writes on this node: :func:`log_dir` and the names of the files in it."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import ray

from raytrace_kit import _ray_compat
from raytrace_kit._output import state as output_state

__all__ = [
    "ENV_LOG_DIR",
    "block_profile_path",
    "call_profile_path",
    "driver_file_name",
    "event_file_name",
    "log_dir",
    "profiles_dir",
    "recent_log_dir",
    "remember_session",
    "runs_dir",
    "samples_file_name",
    "sanitize",
    "session_dir",
]

ENV_LOG_DIR = "RAYTRACE_LOG_DIR"

# Ray's log monitor tails top-level ``worker*`` files; a subdirectory keeps ours out of it.
_SUBDIR = "raytrace_kit"
_NAME_LIMIT = 80


def log_dir() -> Path:
    """Return this node's raytrace_kit directory for the current Ray session.

    The directory is ``<ray temp dir>/<session name>/logs/raytrace_kit/``, found through
    Ray's runtime context, so it is right with a custom ``_temp_dir`` and with several
    clusters on one machine. Ray's dashboard can serve the files in it, and
    ``ray.util.state.list_logs(glob_filter="raytrace_kit/*")`` lists them.

    The environment variable ``RAYTRACE_LOG_DIR`` overrides the location in every process
    that has it set (workers inherit the environment of the ``ray.init()`` that started a
    local cluster; on a remote cluster set it through ``runtime_env={"env_vars": ...}``).
    When Ray is not initialized, the directory is a fresh one under the system temp dir,
    stable for the life of the process.

    The directory is created if it does not exist yet (best effort: a directory that cannot
    be created is reported when something is written to it, not here).

    Returns:
        The directory, as an absolute path.
    """
    override = os.environ.get(ENV_LOG_DIR)
    if override:
        path = Path(override).absolute()
    elif ray.is_initialized():
        path = Path(*_ray_compat.session_location(), "logs", _SUBDIR)
        output_state.state.last_ray_log_dir = path
    else:
        return _fallback_dir()
    with contextlib.suppress(OSError):  # reported by the writer, which owns the warning
        path.mkdir(parents=True, exist_ok=True)
    return path


def remember_session() -> None:
    """Note the Ray session's directory now, for :func:`recent_log_dir` after shutdown."""
    with contextlib.suppress(Exception):  # never in the way of a submission
        if ray.is_initialized():
            log_dir()


def recent_log_dir() -> Path:
    """:func:`log_dir`, or after ``ray.shutdown()`` the directory of the session just ended.

    What "this process's records" means to a user who reads them after shutting Ray down:
    the run's, not the fresh directory of a process without Ray (unless it has events: a
    local-mode run's).
    """
    current = log_dir()
    last = output_state.state.last_ray_log_dir
    if last is None or ray.is_initialized() or os.environ.get(ENV_LOG_DIR):
        return current
    if any(current.glob("events-*.jsonl")):
        return current
    return last


def session_dir() -> Path:
    """The current Ray session's directory (``<temp dir>/<session name>``), else log_dir().

    Unlike :func:`log_dir`, ``RAYTRACE_LOG_DIR`` does not move it.
    """
    if ray.is_initialized():
        return Path(*_ray_compat.session_location())
    return log_dir()


KEEP_RUNS = 20  # runs without Ray kept in the user's directory: older ones are removed


def _fallback_dir() -> Path:
    state = output_state.state
    if state.fallback_dir is None:
        with state.lock:
            if state.fallback_dir is None:
                state.fallback_dir = _new_run_dir()
                atexit.register(_remove_if_empty, state.fallback_dir)
    return state.fallback_dir


def runs_dir() -> Path | None:
    """Where runs without Ray keep their records: one directory per user in the temp dir.

    ``None`` where the system has no user ids (Windows): each run then has a directory of
    its own in the temp dir.
    """
    getuid = getattr(os, "getuid", None)
    return None if getuid is None else Path(tempfile.gettempdir(), f"raytrace_kit-{getuid()}")


def _new_run_dir() -> Path:
    """A directory of its own for this process's run, under :func:`runs_dir`.

    Runs share one parent (mode 0700, owned by this user, not a link: else a directory of
    its own in the temp dir), named by start time and pid so that they sort by age; all
    but the newest :data:`KEEP_RUNS` are removed as a new one starts, never one whose
    process is alive (concurrent workers of a pool, a long local-mode run).
    """
    parent = runs_dir()
    if parent is None:
        return Path(tempfile.mkdtemp(prefix="raytrace_kit-"))
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o700)
    try:
        info = parent.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise PermissionError(parent)  # planted or shared: not ours to write in
    except OSError:
        return Path(tempfile.mkdtemp(prefix="raytrace_kit-"))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    made = Path(tempfile.mkdtemp(prefix=f"{stamp}-{os.getpid()}-", dir=parent))
    ended = [run for run in sorted(parent.iterdir()) if run != made and not _running(run)]
    for old in ended[: max(0, len(ended) + 1 - KEEP_RUNS)]:  # a live run is never removed
        shutil.rmtree(old, ignore_errors=True)
    return made


def _running(run: Path) -> bool:
    """Whether the process a run directory is named for (``<stamp>-<pid>-...``) is alive."""
    try:
        pid = int(run.name.split("-")[2])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:  # alive, another user's (cannot be: the directory is ours)
        return True
    return True


def _remove_if_empty(directory: Path) -> None:
    """At exit: remove a fallback directory nothing was written to.

    One with records stays, to be read (``raytrace-kit report DIR``); empty ones would
    only fill the temp dir, one per process that ever asked where to write.
    """
    with contextlib.suppress(OSError):  # not empty, or gone: leave it
        directory.rmdir()


def event_file_name(node_id: str | None, pid: int) -> str:
    """Name of the event file of one process: ``events-<node id prefix>-<pid>.jsonl``.

    Nodes started on one machine share a session directory, so the node id is in the name;
    pids are unique on one machine, so the pair is unique within a directory.
    """
    node = node_id[:12] if node_id else "nonode"
    return f"events-{node}-{pid}.jsonl"


def driver_file_name(node_id: str | None, pid: int) -> str:
    """Name of a driver's own record (:mod:`raytrace_kit._driver.record`): ``driver-...jsonl``.

    Not ``events-*``: readers of calls never open it; the report reads it for the driver.
    """
    return event_file_name(node_id, pid).replace("events-", "driver-", 1)


def samples_file_name(node_id: str | None, pid: int) -> str:
    """Name of a process's samples file (:mod:`raytrace_kit._output.samples`): ``samples-*``."""
    return event_file_name(node_id, pid).replace("events-", "samples-", 1)


def profiles_dir() -> Path:
    """``log_dir() / "profiles"`` on this node."""
    return log_dir() / "profiles"


def sanitize(text: str, limit: int = _NAME_LIMIT) -> str:
    """``text`` as a safe file name part, at most ``limit`` long (a hash keeps it unique)."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip(".") or "call"
    if len(clean) <= limit:
        return clean
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:8]
    return f"{clean[: limit - 9]}-{digest}"


def _suffix(profiler: str) -> str:
    return "bin" if profiler == "memray" else "prof"


def call_profile_path(
    function: str,
    kind: str,
    *,
    task_id: str | None,
    attempt: int | None,
    call_id: str,
    profiler: str,
) -> Path:
    """``<function>.<kind>.<task id>.a<attempt>.<call id>.<bin|prof>`` in the profiles dir.

    The task id and attempt say which Ray task and retry it was; the call id makes the name
    unique per execution whatever runs it (local calls have no task id).
    """
    task = task_id or "local"
    name = f"{sanitize(function)}.{kind}.{task}.a{attempt or 0}.{call_id}.{_suffix(profiler)}"
    return profiles_dir() / name


def block_profile_path(profiler: str, block_id: str) -> Path:
    """The file in the profiles dir of one ``profile_memory()``/``profile_cpu()`` block."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return profiles_dir() / f"block-{profiler}-{stamp}-{os.getpid()}-{block_id}.{_suffix(profiler)}"
