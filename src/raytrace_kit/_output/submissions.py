"""Submission records (``call.submit``, ``call.cancel``): kept in memory, written in batches.

A call's submission is known only to the process that called ``.remote()``: its record
goes to that process's event file (the driver's own, or the worker's whose call submitted
it). One line per ``.remote()`` would cost a system call each, so a record is a tuple in a
list until the batch is written: with the process's next ``call.start``/``call.end`` line
(one write for both), by the kit's thread at most :data:`FLUSH_S` after the batch began
(:mod:`raytrace_kit._worker.watch`), when :data:`MAX_PENDING` records wait, and at exit.
A process killed with ``kill -9`` loses at most the last :data:`FLUSH_S` of its
submissions; what ran is recorded by the process that ran it.
"""

from __future__ import annotations

import atexit
import contextlib
import time
from typing import TYPE_CHECKING, Any

from raytrace_kit import _registry
from raytrace_kit._output import state as output_state
from raytrace_kit._output import writer
from raytrace_kit._output.submit_lines import cancel_line, rendered, submit_line, submit_prefix

if TYPE_CHECKING:
    from raytrace_kit._process import ProcessIdentity

__all__ = [
    "FLUSH_S",
    "MAX_PENDING",
    "cancel_line",
    "flush",
    "record",
    "record_cancel",
    "rendered",
    "submit_line",
    "submit_prefix",
]

FLUSH_S = 0.2  # a batch waits at most this long (the kit's thread writes it)
MAX_PENDING = 1000  # ...or until this many records wait


def record(  # noqa: PLR0917 -- positional: this runs on every .remote() of a debuggable
    prefix: str,
    task_id: str | None,
    actor_id: str | None,
    parent: str | None,
    identity: ProcessIdentity,
    site: str | None,
    arg_task_ids: list[str] | None,
    large_args: list[list[Any]] | None = None,
) -> None:
    """Keep one submission record (``prefix`` from :func:`submit_prefix`)."""
    state = output_state.state
    pending = state.submissions
    pending.append(
        (time.time(), prefix, task_id, actor_id, parent, identity, site, arg_task_ids, large_args)
    )
    count = len(pending)
    if count == 1:
        wake = state.wake
        if wake is not None:
            wake()
    elif count >= MAX_PENDING:
        flush()


def record_cancel(task_id: str, force: bool, identity: ProcessIdentity) -> None:
    """Keep a ``call.cancel`` record: ``ray.cancel`` of a task (it may never start now)."""
    state = output_state.state
    state.submissions.append((time.time(), None, task_id, force, None, identity, None, None, None))
    if len(state.submissions) == 1 and state.wake is not None:
        state.wake()


def flush() -> None:
    """Write every waiting record to its process's event file now. Never raises."""
    try:
        while output_state.state.submissions:
            identity = output_state.state.submissions[0][5]
            lines = rendered(identity)
            if lines:
                writer.write_line(lines, identity)
    except Exception as exc:
        writer.report_failure("submissions", "cannot write the submission records", exc)


def _flush_quietly() -> None:
    """:func:`flush` at exit or at a reset, where an error would reach no one.

    A warning turned into an error (``-W error::RaytraceKitWarning``) has no caller here.
    """
    with contextlib.suppress(Exception):
        flush()


atexit.register(_flush_quietly)
# A reset (raytrace_kit.testing.reset()) writes what waits before the files are closed:
# registered above the output room's own reset, which closes them.
_registry.register(_flush_quietly, layer=_registry.WORKER)
