"""The objects this process holds refs to, as its core worker's reference table has them.

Ray 2.60 has no public way to list a process's refs without the dashboard
(``ray.util.state.list_objects`` needs it, and ``ray memory`` needs ``grpcio``, which
plain ``ray`` does not install). The core worker itself answers both questions in
process: ``get_all_reference_counts()`` (object id -> local and submitted-task counts,
what ``ray memory`` shows as "local ref" and "used by pending task") and
``get_local_object_locations()`` (each owned object's size and whether it was spilled).
Both are private members of ``ray._raylet.CoreWorker`` (the same in Ray 2.40 and 2.60).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ray

__all__ = ["HeldObject", "held_objects"]


class HeldObject(NamedTuple):
    """One object this process holds a ref to: its id (hex), size, spill and counts."""

    object_id: str
    size: int
    spilled: bool
    local: int  # refs in this process's Python objects
    submitted: int  # tasks submitted with it as an argument, not yet finished


def held_objects() -> list[HeldObject]:
    """Every object this process's refs keep alive and whose size its owner knows.

    Objects not made yet (their task still pending) and objects this process does not own
    (their size is known to their owner) are left out. Empty when Ray is not initialized.
    """
    if not ray.is_initialized():
        return []
    core = ray._private.worker.global_worker.core_worker
    counts: dict[bytes, dict[str, int]] = core.get_all_reference_counts()
    if not counts:
        return []
    # Made as plain refs: each adds a local ref and removes it when it goes, which leaves
    # the counts as they were. (skip_adding_local_ref=True would still remove one when the
    # ref goes, in Ray 2.60: the program's own ref lost, its object freed.) The counts
    # were read before, so ours are not in them.
    refs = [ray.ObjectRef(bytes.fromhex(key.decode())) for key in counts]
    where: dict[Any, dict[str, Any] | None] = core.get_local_object_locations(refs)
    held = []
    for ref, key in zip(refs, counts, strict=True):
        located = where.get(ref) or {}
        size = located.get("object_size") or 0
        if size <= 0:
            continue
        count = counts[key]
        held.append(
            HeldObject(
                key.decode(),
                int(size),
                bool(located.get("did_spill")),
                int(count.get("local", 0)),
                int(count.get("submitted", 0)),
            )
        )
    return held
