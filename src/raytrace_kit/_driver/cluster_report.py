"""``report()``: the report of a run's files, or of a running cluster's, computed on its nodes.

Without ``address`` this is the report of the files (no Ray needed), read in one pass or,
for a large session, by two processes and merged (``_reports/cluster/parallel.py``): the
same report. With it, each node's reader (``readers.py``) tallies that node's files where
they are and only what merges travels (``_reports/cluster/partial.py``, ``merge.py``): the
same report as ``collect()`` then ``report()``, without copying the event files.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from raytrace_kit._reports.cluster import report_in_parallel
from raytrace_kit._reports.reading import Session, flush_own, instant
from raytrace_kit.exceptions import InvalidValueError, UsageError

if TYPE_CHECKING:
    from datetime import datetime

    from raytrace_kit._reports.run import Report

__all__ = ["report"]


def report(
    source: str | os.PathLike[str] | Session | None = None,
    *,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    address: str | None = None,
    timeout: float = 600.0,
) -> Report:
    """The report of a run's files, or (``address``) of a running cluster's, on its nodes.

    Overview, failures, interrupted calls, time, memory, findings: one pass over the
    events, keeping aggregates (a million events in well under 256 MB). With ``address`` each node's
    reader makes that pass over its own files and only the aggregates travel.

    Args:
        source: What :func:`raytrace_kit.open_session` takes, or a session.
        since: Only calls that started at or after this time (ISO 8601 text, ``Z`` or an
            offset, or a ``datetime``; naive ones are UTC): one run of a long session.
        until: Only calls that started before this time (as ``since``).
        address: Report on a running cluster's files where they are: ``"auto"`` or
            ``HOST:PORT`` (the connected cluster, if Ray is initialized). Each node's
            files are tallied on that node and only the tallies travel; the report is
            the one :func:`raytrace_kit.collect` then ``report()`` gives.
        timeout: Seconds to wait for a node's answer (with ``address``).

    Raises:
        EventsNotFoundError: ``source`` holds no event files.
        InvalidValueError: ``since`` is not before ``until``.
        UsageError: Both ``source`` and ``address`` are given.
    """
    if address is None:  # one pass, or two processes for a large session: the same report
        return report_in_parallel(source, since=since, until=until)
    if source is not None:
        msg = (
            "report(source, address=...): give one. A source is a run's files on this "
            "machine; an address reads a running cluster's files on its nodes."
        )
        raise UsageError(msg)
    start, end = instant(since), instant(until)
    if start is not None and end is not None and start >= end:
        msg = f"since={since!r} is not before until={until!r}: the window is empty"
        raise InvalidValueError(msg)
    import ray  # noqa: PLC0415 -- only a cluster's report needs Ray

    from raytrace_kit._driver import readers  # noqa: PLC0415
    from raytrace_kit._driver.attach import attached  # noqa: PLC0415
    from raytrace_kit._output import writer  # noqa: PLC0415
    from raytrace_kit._reports.cluster import cluster_report  # noqa: PLC0415

    flush_own()  # this driver's submission records: in its file before its node reads it
    with contextlib.ExitStack() as stack:
        if not ray.is_initialized():
            stack.enter_context(attached(address))
        reading = readers.Readers(timeout=timeout)
        if reading.problems:  # a report of the nodes that answered, the others named
            writer.warn(
                f"report(address=...): could not read {len(reading.problems)} node(s): "
                + "; ".join(reading.problems),
                stacklevel=2,
            )
        try:
            return cluster_report(
                reading.ask, len(reading), since=start, until=end, source=readers.cluster_name()
            )
        finally:
            reading.close()
