"""The event schema as readers see it: each event's fields, typed, in one place.

The writer renders events with f-string fragments for speed (:mod:`.encode`); readers
decode them straight into these records with msgspec. ``tests/unit/test_schema.py``
encodes each event through the writer's own functions and decodes it here, so a field
renamed or added on one side and not the other fails there. Imported by readers only
(never in workers): msgspec loads with it.
"""

from __future__ import annotations

import msgspec

__all__ = ["Call", "CallStart"]


class Call(msgspec.Struct, gc=False):
    """One execution of an instrumented function or method: its start and end, joined.

    ``status`` is ``"ok"``, ``"error"``, or ``"interrupted"`` (a ``call.start`` with no
    ``call.end``: the process died during the call). ``started``/``ended`` are ISO 8601
    timestamps. Memory figures are the process's at the start and at the end (``None``
    where unknown, and at the start for events of schema 1, which had none);
    :attr:`rss_growth_bytes` is what the process grew by during the call.
    """

    call_id: str = ""
    function: str = ""
    kind: str | None = None
    mode: str | None = None
    status: str = "interrupted"
    started: str = ""
    ended: str | None = msgspec.field(default=None, name="timestamp")
    duration_s: float | None = None
    cpu_s: float | None = None
    process_cpu_s: float | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    task_id: str | None = None
    task_name: str | None = None
    actor_id: str | None = None
    job_id: str | None = None
    node_id: str | None = None
    worker_id: str | None = None
    pid: int | None = None
    attempt: int | None = None
    parent_call_id: str | None = None
    parent_task_id: str | None = None
    rss_start_bytes: int | None = None
    rss_end_bytes: int | None = msgspec.field(default=None, name="rss_bytes")
    rss_minus_shr_end_bytes: int | None = msgspec.field(default=None, name="rss_minus_shr_bytes")
    max_rss_bytes: int | None = None
    profile_path: str | None = None

    @property
    def rss_growth_bytes(self) -> int | None:
        """RSS at the end minus RSS at the start (``None`` if either is unknown)."""
        if self.rss_start_bytes is None or self.rss_end_bytes is None:
            return None
        return self.rss_end_bytes - self.rss_start_bytes


class CallStart(msgspec.Struct, gc=False):
    """What a call's ``call.end`` needs of its ``call.start``."""

    call_id: str = ""
    timestamp: str = ""
    rss_bytes: int | None = None
