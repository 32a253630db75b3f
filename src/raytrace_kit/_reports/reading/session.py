"""``open_session()``: any run's records, from any process, with or without Ray running.

A session is a set of event files: this process's current ones, a Ray session directory
(its ``logs/raytrace_kit``), a folder made by :func:`raytrace_kit.collect`, or one file.
:meth:`Session.calls` joins each call's ``call.start`` and ``call.end`` into one
:class:`Call`; a start with no end is an *interrupted* call (its process died).

Parsing uses msgspec: each line is decoded straight into a typed record holding only the
fields a :class:`Call` needs, file by file, so that a million events read in about two
seconds in well under a gigabyte (``benchmarks/sessions.py``).
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._html import card, table
from raytrace_kit._output.schema import Call
from raytrace_kit._reports.reading.calls import (
    STARTED,
    distinct_processes,
    iter_calls,
    process_calls,
    processes,
    unique,
)
from raytrace_kit._reports.reading.columns import first_last_stamps
from raytrace_kit._reports.reading.driver import DRIVER_GLOB
from raytrace_kit._reports.reading.listing import Calls, Events
from raytrace_kit._reports.reading.session_list import (
    EVENT_GLOB,
    choose_latest,
    ray_temp_root,
    session_start,
)
from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError

__all__ = [
    "Call",
    "Calls",
    "Events",
    "Session",
    "current_session",
    "flush_own",
    "instant",
    "open_session",
]


class Session:
    """The records of one run: events, calls, profiles. Made by :func:`open_session`."""

    def __init__(self, root: Path, files: list[Path], search: Path | None = None) -> None:
        self.root = root
        self.files = files
        self._search = search if search is not None else root
        self._children: dict[str | None, list[Call]] | None = None

    def __repr__(self) -> str:
        return f"Session({str(self.root)!r}, {len(self.files)} event files)"

    def _overview(self) -> list[tuple[str, str]]:
        """What a glance at the files says, without reading them: counts, size, time span."""
        groups = processes(self.files)
        nodes = {g[-1].name.split("-")[1] for g in groups if g[-1].name.count("-") >= 2}
        size = sum(_size(f) for f in self.files)
        rows = [
            ("event files", f"{len(self.files)} ({size / 2**20:.1f} MiB)"),
            ("processes", str(len(groups))),
            ("nodes", str(len(nodes))),
        ]
        stamps = [stamp for f in self.files[:_GLANCE_FILES] for stamp in first_last_stamps(f)]
        if stamps:
            rows.append(("first and last event", f"{min(stamps)}  to  {max(stamps)}"))
        rows.append(("read it", ".calls(), .events(status='error'), raytrace_kit.report(session)"))
        return rows

    def __str__(self) -> str:
        return "\n".join([repr(self), *(f"  {k}: {v}" for k, v in self._overview())])

    def _repr_html_(self) -> str:
        return card("Session", str(self.root), table(("", ""), self._overview()))

    def _lines(self) -> Iterator[bytes]:
        for file in self.files:
            try:
                handle = file.open("rb")
            except OSError:
                continue  # removed while we listed: nothing to report
            with handle:
                yield from handle

    def events(
        self,
        *,
        event: str | None = None,
        function: str | None = None,
        status: str | None = None,
        node: str | None = None,
        since: str | datetime.datetime | None = None,
        until: str | datetime.datetime | None = None,
    ) -> Events:
        """Every event (as a dict), oldest first, optionally filtered.

        Args:
            event: Only events of this name (``"call.end"``...).
            function: Only events of this function (module-qualified, or a suffix of it
                after a dot: ``"stage"`` matches ``"pipeline.stage"``).
            status: Only ``call.end`` events of this status (``"ok"``/``"error"``), or
                ``"interrupted"``: the ``call.start`` of each call that has no end.
            node: Only events of nodes whose id starts with this.
            since: Only events at or after this time (ISO 8601 text, ``Z`` or an offset, or
                a ``datetime``; naive ones are UTC).
            until: Only events before this time (as ``since``).

        A truncated line (a process killed while writing) and anything that is not a JSON
        object are skipped.
        """
        decode = msgspec.json.decode
        since, until = instant(since), instant(until)
        found = Events()
        # status="interrupted": the starts of the calls the per-process join finds unended.
        wanted = (
            {call.call_id for call in self.calls(status="interrupted")}
            if status == "interrupted"
            else None
        )
        for raw in self._lines():
            try:
                item = decode(raw)
            except msgspec.DecodeError:
                continue
            if not isinstance(item, dict):
                continue
            if wanted is not None:
                if (
                    item.get("call_id") in wanted
                    and item.get("event") == "call.start"
                    and (_matches(item, event, function, None, node, since, until))
                ):
                    found.append(item)
            elif _matches(item, event, function, status, node, since, until):
                found.append(item)
        found.sort(key=lambda item: str(item.get("timestamp", "")))
        return found

    def calls(self, *, function: str | None = None, status: str | None = None) -> Calls:
        """One :class:`Call` per execution, in order of start (interrupted ones included).

        Args:
            function: Only calls of this function (as in :meth:`events`).
            status: Only calls of this status: ``"ok"``, ``"error"`` or ``"interrupted"``.
        """
        made: list[Call] = []
        if function is None and status is None:
            for files in processes(self.files):
                process_calls(files, made)
            made = unique(made)
        else:  # filtered as they are read, each process's files once: only these are kept
            for files in distinct_processes(self.files):
                made.extend(
                    call
                    for call in iter_calls(files)
                    if (function is None or _function_matches(call.function, function))
                    and (status is None or call.status == status)
                )
        made.sort(key=STARTED)
        return Calls(made)

    def children(self, call: Call | str) -> list[Call]:
        """The calls submitted during ``call`` (by ``parent_call_id``), in order of start.

        The files are read once per session for this (the first ``children()``); open the
        session again to see calls written since.
        """
        index = self._children
        if index is None:
            index = self._children = {}
            for made in self.calls():
                index.setdefault(made.parent_call_id, []).append(made)
        return list(index.get(call if isinstance(call, str) else call.call_id, ()))

    def driver_files(self) -> list[Path]:
        """The drivers' own records (``driver-*.jsonl``: ``instrument()``, ``raytrace-kit run``)."""
        if not self._search.is_dir():
            return []
        return sorted(self._search.rglob(DRIVER_GLOB))

    def sample_files(self) -> list[Path]:
        """The sampling profiler's files (``samples-*.jsonl``: ``sample=``), one per process."""
        if not self._search.is_dir():
            return []
        return sorted(self._search.rglob("samples-*.jsonl"))

    def profiles(self) -> list[Path]:
        """The profile captures (``.bin``: memray, ``.prof``: cProfile), oldest first.

        Each capture of a call has a ``.json`` sidecar next to it (``path.with_suffix``).
        """
        root = self._search if self._search.is_dir() else self._search.parent
        found = [
            path
            for pattern in ("*.bin", "*.prof")
            for path in root.rglob(pattern)
            if path.parent.name == "profiles"
        ]
        return sorted(found, key=_mtime)

    def to_pandas(self) -> Any:
        """:meth:`calls` as a pandas ``DataFrame``, one row per call (needs pandas).

        Raises:
            ImportError: pandas is not installed (``pip install raytrace_kit[pandas]``).
        """
        try:
            import pandas as pd  # noqa: PLC0415 -- an optional extra
        except ImportError as exc:
            msg = "Session.to_pandas() needs pandas: pip install 'raytrace_kit[pandas]'"
            raise ImportError(msg) from exc
        return pd.DataFrame(_columns(self.calls()))

    def to_arrow(self) -> Any:
        """:meth:`calls` as a pyarrow ``Table``, one row per call (needs pyarrow).

        Raises:
            ImportError: pyarrow is not installed (``pip install raytrace_kit[arrow]``).
        """
        try:
            import pyarrow as pa  # noqa: PLC0415 -- an optional extra
        except ImportError as exc:
            msg = "Session.to_arrow() needs pyarrow: pip install 'raytrace_kit[arrow]'"
            raise ImportError(msg) from exc
        return pa.table(_columns(self.calls()))

    def to_otel(self, exporter: Any, *, service_name: str = "ray", batch_size: int = 512) -> int:
        """Hand every call, as a span, to an OpenTelemetry SDK span exporter; say how many.

        ``exporter``: any SDK ``SpanExporter`` (flushed, not shut down). Spans go in batches
        of ``batch_size``, as the files are read; ``service_name`` is their ``service.name``;
        calls still running are left out. Raises ``MissingExtraError`` without the SDK
        (``pip install 'raytrace_kit[otel]'``), ``ExportError`` when a batch fails.
        docs/otel.md says what a span holds.
        """
        from raytrace_kit._reports.otel.export import to_otel  # noqa: PLC0415 -- an extra

        return to_otel(self, exporter, service_name=service_name, batch=batch_size).spans


_GLANCE_FILES = 200  # a session's overview reads the first and last line of this many


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def _columns(calls: list[Call]) -> dict[str, list[Any]]:
    names = [*Call.__struct_fields__, "rss_growth_bytes"]
    return {name: [getattr(call, name) for call in calls] for name in names}


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _function_matches(name: str, wanted: str) -> bool:
    return name == wanted or name.endswith("." + wanted)


def _matches(  # noqa: PLR0917 -- one test per filter, in one place
    item: dict[str, Any],
    event: str | None,
    function: str | None,
    status: str | None,
    node: str | None,
    since: str | None,
    until: str | None,
) -> bool:
    if event is not None and item.get("event") != event:
        return False
    if function is not None and not _function_matches(str(item.get("function")), function):
        return False
    if status is not None and item.get("status") != status:
        return False
    if node is not None and not str(item.get("node_id") or "").startswith(node):
        return False
    stamp = str(item.get("timestamp", ""))
    if since is not None and stamp < since:
        return False
    return until is None or stamp < until


def instant(value: str | datetime.datetime | None) -> str | None:
    """A time bound as the events write it: ISO 8601 UTC with ``+00:00``, microseconds.

    Raises:
        InvalidValueError: ``value`` is not an ISO 8601 time (a ``ValueError``).
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            msg = (
                f"{value!r} is not an ISO 8601 time: give a date and a time, for example "
                "2026-11-22T14:05:00Z (UTC) or 2026-11-22T15:05:00+01:00"
            )
            raise InvalidValueError(msg) from None
    else:
        parsed = value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.astimezone(datetime.timezone.utc).isoformat(timespec="microseconds")


def flush_own() -> None:
    """Write this process's submission records still in memory, before it reads files.

    Only a process that submitted debuggable calls has any (its module is loaded then);
    reading never imports Ray for it.
    """
    loaded = sys.modules.get("raytrace_kit._output.submissions")
    if loaded is not None:
        loaded.flush()


def open_session(source: str | os.PathLike[str] | None = None) -> Session:
    """Open a run's records: events, calls and profiles. Ray need not be running.

    Args:
        source: ``None``: this process's current session (:func:`raytrace_kit.log_dir`;
            after ``ray.shutdown()``, the session that just ended).
            ``"latest"``: the newest Ray session on this machine that has kit records
            and belongs to this user (:func:`raytrace_kit.sessions` lists them; Ray's own
            ``session_latest`` may be a colleague's or a test suite's). A path: a Ray session
            directory or its name (as :func:`raytrace_kit.sessions` lists it), its
            ``logs/raytrace_kit`` directory, a directory made by
            :func:`raytrace_kit.collect`, or a single event file.

    Raises:
        EventsNotFoundError: ``source`` does not exist (or, for ``"latest"``, no session
            of this user's has kit records).

    Returns:
        The session; nothing is read until asked (``calls()``, ``events()``...).
    """
    flush_own()
    if source is None:
        from raytrace_kit._output import paths  # noqa: PLC0415 -- imports Ray: only here

        root = paths.recent_log_dir()
    elif str(source) == "latest":
        root = choose_latest().path
    else:
        root = Path(source)
        if not root.exists() and session_start(str(source)) is not None:
            root = ray_temp_root() / root  # a name as `raytrace-kit sessions` lists it
    if not root.exists():
        msg = (
            f"open_session({str(root)!r}): no such file or directory. Pass a Ray session "
            "directory (or its name, as `raytrace-kit sessions` lists it), a raytrace_kit "
            "log directory, a collected directory or an event file."
        )
        raise EventsNotFoundError(msg)
    if root.is_file():
        return Session(root, [root])
    kit_dir = root / "logs" / "raytrace_kit"  # a Ray session directory: only our files
    search = kit_dir if kit_dir.is_dir() else root
    return Session(root, sorted(search.rglob(EVENT_GLOB)), search)


def current_session() -> Session | None:
    """This process's current session (``open_session()``), or None where it has none."""
    try:
        return open_session()
    except (EventsNotFoundError, OSError):
        return None
