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
import functools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raytrace_kit import _registry
from raytrace_kit._output import encode, writer
from raytrace_kit._output import state as output_state

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


def submit_prefix(
    function: str,
    kind: str,
    resources: Mapping[str, float],
    scheduling: str | None,
    actor: Mapping[str, Any] | None = None,
    *,
    code_bytes: int | None = None,
) -> str:
    """The members of ``call.submit`` fixed for one submitted object: rendered once.

    ``actor`` holds an actor creation's ``max_concurrency`` and ``async``; ``code_bytes``
    the size of a remote function as Ray pickled it, written only when it is large.
    """
    fields: dict[str, Any] = {
        "function": function,
        "kind": kind,
        "resources": dict(resources),
        "scheduling": scheduling,
    }
    if actor:
        fields.update(actor)
    if code_bytes is not None:
        fields["code_bytes"] = code_bytes
    return encode.members(fields)


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=4096)
def _site_member(site: str) -> str:
    """``"site":"<file:line>"``, escaped as JSON (a few hundred sites a run: cached)."""
    return encode.members({"site": site})


def submit_line(  # noqa: PLR0917 -- positional: one tuple per submission, rendered in batches
    when: float,
    prefix: str,
    task_id: str | None,
    actor_id: str | None,
    parent: str | None,
    identity: ProcessIdentity,
    site: str | None,
    arg_task_ids: list[str] | None,
    large_args: list[list[Any]] | None = None,
) -> bytes:
    """One ``call.submit`` line (see the module's docstring).

    ``large_args``: ``[where, bytes, serial, type]`` of each argument passed by value that
    is large (``_worker.by_value``), a member only when there is one.
    """
    parents = encode.parent_members(parent)
    task = "null" if task_id is None else f'"{task_id}"'
    actor = "null" if actor_id is None else f'"{actor_id}"'
    where = '"site":null' if site is None else _site_member(site)
    args = ",".join(f'"{i}"' for i in arg_task_ids) if arg_task_ids else ""
    large = "" if large_args is None else "," + encode.members({"large_args": large_args})
    line = (
        f'{{"timestamp":"{encode.stamp(when)}","level":"info","event":"call.submit","schema":{encode.SCHEMA},'
        f'"task_id":{task},{prefix},"actor_id":{actor},{parents},'
        f'{encode.identity_members(identity)},{where},"arg_task_ids":[{args}]{large}}}\n'
    )
    return line.encode("utf-8", "backslashreplace")


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


def cancel_line(when: float, task_id: str, force: bool, identity: ProcessIdentity) -> bytes:
    """One ``call.cancel`` line: which task was cancelled, when, by which process."""
    return (
        f'{{"timestamp":"{encode.stamp(when)}","level":"info","event":"call.cancel",'
        f'"schema":{encode.SCHEMA},"task_id":"{task_id}","force":{"true" if force else "false"},'
        f"{encode.identity_members(identity)}}}\n"
    ).encode()


def _line(entry: tuple[Any, ...]) -> bytes:
    if entry[1] is None:  # a cancellation (see record_cancel)
        return cancel_line(entry[0], entry[2], entry[3], entry[5])
    return submit_line(*entry)


def rendered(identity: ProcessIdentity | None = None) -> bytes:
    """Take the waiting records (of ``identity``'s file, or all) and render them as lines."""
    state = output_state.state
    pending = state.submissions
    if not pending:
        return b""
    with state.lock:
        # Taken from the list, not by swapping in a new one: record() in another thread
        # may hold the list and append to it at any moment; its record stays, at the end.
        count = len(pending)
        taken = pending[:count]
        del pending[:count]
    if identity is not None and any(entry[5] is not identity for entry in taken):
        # Another connection's records (ray.shutdown() then ray.init()): to their own file.
        state.submissions.extend(entry for entry in taken if entry[5] is not identity)
        taken = [entry for entry in taken if entry[5] is identity]
    return b"".join(_line(entry) for entry in taken)


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
