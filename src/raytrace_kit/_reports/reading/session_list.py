"""``sessions()``: this machine's Ray sessions that hold kit records, and the default one.

Ray makes one directory per session under its temp root (``RAY_TMPDIR``, else
``/tmp/ray``), named after the local time the session's head started and the pid that
started it: ``session_2026-11-25_10-12-03_123456_4242``. The kit's records are in its
``logs/raytrace_kit``. What reads a run defaults to the newest session that has kit
records and belongs to this user (the owner of its directory), not to Ray's
``session_latest``, which is whatever Ray started last here: a colleague's cluster, or
one's own test suite.

Calls and failures are counted by bytes, without decoding events (:mod:`.counts`).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from raytrace_kit._reports.reading import running
from raytrace_kit._reports.reading.counts import Counts, count
from raytrace_kit._reports.reading.session_table import sessions_html, sessions_table
from raytrace_kit.exceptions import EventsNotFoundError

__all__ = [
    "EVENT_GLOB",
    "Choice",
    "Driver",
    "SessionList",
    "SessionSummary",
    "choose_latest",
    "kit_files",
    "ray_temp_root",
    "session_dir_of",
    "session_start",
    "sessions",
    "summarize",
]

_NAME = re.compile(r"^session_(?P<when>\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_\d{6})_(?P<pid>\d+)$")
EVENT_GLOB = "events-*.jsonl"  # the kit's event files, rotated ones included


def ray_temp_root() -> Path:
    """Ray's temp root on this machine, as Ray resolves it (``RAY_TMPDIR``, ``TMPDIR``)."""
    # As Ray 2.60's get_default_system_temp_dir: RAY_TMPDIR, else TMPDIR on Linux, else /tmp.
    base = os.environ.get("RAY_TMPDIR")
    if base is None and sys.platform.startswith("linux"):
        base = os.environ.get("TMPDIR")
    return Path(base or "/tmp", "ray")  # noqa: S108 -- Ray's own default


def session_start(name: str) -> datetime | None:
    """When a session started, from its directory's name (local time, as Ray writes it)."""
    match = _NAME.match(name)
    if not match:
        return None
    return datetime.strptime(match["when"], "%Y-%m-%d_%H-%M-%S_%f").astimezone()


def session_dir_of(path: Path) -> Path | None:
    """The Ray session directory ``path`` is or is in (its ``logs/raytrace_kit``...)."""
    for candidate in (path, *path.absolute().parents):
        if _NAME.match(candidate.name):
            return candidate
    return None


def kit_files(session_dir: Path) -> list[Path]:
    """The kit's event files in a session directory, sorted."""
    return sorted((session_dir / "logs" / "raytrace_kit").rglob(EVENT_GLOB))


def _has_records(session_dir: Path) -> bool:
    return any(_size(file) for file in (session_dir / "logs" / "raytrace_kit").rglob(EVENT_GLOB))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass(frozen=True)
class Driver:
    """A driver of a session: its job, its pid, when it connected, its script if known."""

    job_id: str
    pid: int
    connected: datetime | None
    script: str | None  # known while its process runs: Ray keeps it nowhere on disk


@dataclass(frozen=True)
class SessionSummary:
    """One Ray session on this machine, at a glance. Made by :func:`raytrace_kit.sessions`.

    ``running`` is ``None`` where processes cannot be seen (no ``/proc``). ``drivers``
    are the processes that connected to it as drivers, in job order; a driver's
    ``script`` is known while its process runs. ``calls`` counts each call's start
    (interrupted calls included), ``failures`` the calls that raised.
    """

    path: Path
    started: datetime | None
    running: bool | None
    address: str | None
    drivers: tuple[Driver, ...]
    nodes: int
    calls: int
    failures: int
    owner_uid: int
    last_record: datetime | None
    default: bool = False

    @property
    def name(self) -> str:
        """The session's name, its directory's."""
        return self.path.name

    @property
    def yours(self) -> bool:
        """Whether this user owns the session's directory."""
        return self.owner_uid == _uid()

    @property
    def owner(self) -> str:
        """The owner's user name (``uid N`` where the machine has no name for it)."""
        try:
            import pwd  # noqa: PLC0415 -- not on Windows

            return pwd.getpwuid(self.owner_uid).pw_name
        except (ImportError, KeyError):
            return f"uid {self.owner_uid}"

    @property
    def script(self) -> str | None:
        """The first known script of its drivers, as given on their command line."""
        return next((d.script for d in self.drivers if d.script), None)

    def to_dict(self) -> dict[str, Any]:
        """As JSON can hold it (times as ISO 8601 with this machine's offset)."""
        return {
            "session": self.name,
            "path": str(self.path),
            "started": _iso(self.started),
            "running": self.running,
            "address": self.address,
            "drivers": [
                {
                    "job_id": d.job_id,
                    "pid": d.pid,
                    "connected": _iso(d.connected),
                    "script": d.script,
                }
                for d in self.drivers
            ],
            "nodes": self.nodes,
            "calls": self.calls,
            "failures": self.failures,
            "owner": self.owner,
            "owner_uid": self.owner_uid,
            "yours": self.yours,
            "last_record": _iso(self.last_record),
            "default": self.default,
        }


def _iso(when: datetime | None) -> str | None:
    return when.isoformat(timespec="seconds") if when is not None else None


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else -1


def _owner(path: Path) -> int:
    try:
        return path.stat().st_uid
    except OSError:
        return -1


def summarize(
    session_dir: Path,
    processes: list[running.RayNode] | None,
    files: list[Path] | None = None,
    *,
    default: bool = False,
    not_driver: int | None = None,
    counts: Counts | None = None,
) -> SessionSummary:
    """A session at a glance; ``files`` are its event files (default: its ``kit_files``).

    ``processes`` are the Ray processes running here (:func:`running.ray_processes`);
    ``not_driver`` is a pid connected as a driver that is not the run's (``collect``'s own);
    ``counts``, the files' calls if the caller has them (else counted here).
    """
    files = kit_files(session_dir) if files is None else files
    counts = counts or count(files)
    here = os.path.realpath(session_dir)
    mine = [p for p in processes or [] if os.path.realpath(p.session_dir) == here]
    address = next((p.gcs_address for p in mine if p.gcs_address), None)
    drivers = []
    for job_id, pid, connected in running.driver_logs(session_dir / "logs"):
        if pid == not_driver:
            continue
        when = datetime.fromtimestamp(connected).astimezone() if connected is not None else None
        drivers.append(Driver(job_id, pid, when, running.script_of(pid, connected)))
    stamps = [_mtime(file) for file in files]
    last = max(stamps) if stamps else None
    return SessionSummary(
        path=session_dir,
        started=session_start(session_dir.name),
        running=None if processes is None else bool(mine),
        address=address,
        drivers=tuple(drivers),
        nodes=counts.nodes,
        calls=counts.calls,
        failures=counts.failures,
        owner_uid=_owner(session_dir),
        last_record=datetime.fromtimestamp(last, timezone.utc).astimezone() if last else None,
        default=default,
    )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _session_dirs(root: Path) -> list[Path]:
    """The session directories under ``root``, newest first."""
    found = [path for path in root.glob("session_*") if _NAME.match(path.name) and path.is_dir()]
    return sorted(found, key=lambda p: p.name, reverse=True)  # the name starts with the time


@dataclass(frozen=True)
class Choice:
    """The default session, and what was passed over to find it.

    ``newest_without_records`` is this user's newest session when it has no kit records
    (a run that failed before its first remote call, or ran without the kit): the
    default is then an older run, and the line that names it says so first.
    """

    path: Path
    newer_without_records: int = 0
    newer_of_others: int = 0
    others_with_records: int = 0
    newest_without_records: Path | None = None


def choose_latest(root: Path | None = None) -> Choice:
    """The newest session on this machine that has kit records and belongs to this user.

    Raises:
        EventsNotFoundError: There is none (the message says what there is).
    """
    root = ray_temp_root() if root is None else root
    chosen: Path | None = None
    newest: Path | None = None  # of yours, newer than the chosen: it has no kit records
    without = others = with_records = 0
    for path in _session_dirs(root):
        has = _has_records(path)
        with_records += has
        if chosen is not None:
            continue
        if not has:
            without += 1
            if newest is None and _owner(path) == _uid():
                newest = path
        elif _owner(path) != _uid():
            others += 1
        else:
            chosen = path
    if chosen is None:
        msg = (
            f"no Ray session of yours with kit records under {root} (Ray's temp root; "
            f"RAY_TMPDIR moves it): {without} session(s) without kit records, {others} "
            "of other users. `raytrace-kit sessions` lists those with records; pass a "
            "session's directory (or a collected folder, an event file) as SOURCE."
        )
        raise EventsNotFoundError(msg)
    return Choice(chosen, without, others, with_records - 1, newest)


class SessionList(list[SessionSummary]):
    """The sessions with kit records, newest first: a table in a terminal and a notebook."""

    def __init__(self, items: list[SessionSummary], root: Path, without_records: int) -> None:
        super().__init__(items)
        self.root = root
        self.without_records = without_records

    @property
    def default(self) -> SessionSummary | None:
        """The session commands read when given no source."""
        return next((s for s in self if s.default), None)

    def __str__(self) -> str:
        return sessions_table(self)

    def _repr_html_(self) -> str:
        return sessions_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("SessionList(...)" if cycle else str(self))


def sessions(root: str | os.PathLike[str] | None = None) -> SessionList:
    """The Ray sessions on this machine that hold raytrace_kit records, newest first.

    Each says when it started, whether it still runs (and at which address), its
    drivers (their scripts while they run), its nodes, calls and failures, and whose it
    is. The one marked ``default`` is what ``open_session("latest")`` and the
    ``raytrace-kit`` commands read when given no source: the newest that has kit records
    and belongs to this user. Calls are counted without decoding events: a million events
    in under a second.

    Args:
        root: Ray's temp root (default: ``RAY_TMPDIR``'s ``ray``, else ``/tmp/ray``).

    Returns:
        A list of :class:`SessionSummary`; it shows as a table (``print``, notebooks).
    """
    base = ray_temp_root() if root is None else Path(root)
    processes = running.ray_processes()
    made: list[SessionSummary] = []
    without = 0
    default_found = False
    for path in _session_dirs(base):
        if not _has_records(path):
            without += 1
            continue
        is_default = not default_found and _owner(path) == _uid()
        default_found = default_found or is_default
        made.append(summarize(path, processes, default=is_default))
    return SessionList(made, base, without)
