"""The lines of submission records (``call.submit``, ``call.cancel``), and the waiting ones taken.

Below both the writer, which writes the waiting records ahead of a call's line in the same
write, and :mod:`.submissions`, which keeps them and flushes them: neither imports the
other's way round.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raytrace_kit import _registry
from raytrace_kit._output import encode
from raytrace_kit._output import state as output_state

if TYPE_CHECKING:
    from raytrace_kit._process import ProcessIdentity

__all__ = ["cancel_line", "rendered", "submit_line", "submit_prefix"]


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
