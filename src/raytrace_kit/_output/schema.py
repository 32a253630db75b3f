"""The event schema as readers see it: each event's fields, typed, in one place.

The writer renders events with f-string fragments for speed (:mod:`.encode`); readers
decode them straight into these records with msgspec. ``tests/unit/test_schema.py``
encodes each event through the writer's own functions and decodes it here, so a field
renamed or added on one side and not the other fails there. Imported by readers only
(never in workers): msgspec loads with it.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Blocked", "Call", "CallStart", "DataSizes", "Stuck", "Submission", "Submitted"]


class DataSizes(msgspec.Struct, gc=False):
    """A Ray Data batch's rows and bytes in and out, and the operator Ray Data ran it in."""

    op: str | None = None
    rows_in: int | None = None
    bytes_in: int | None = None
    rows_out: int | None = None
    bytes_out: int | None = None


class Call(msgspec.Struct, gc=False):
    """One execution of an instrumented function or method: its start and end, joined.

    ``status`` is ``"ok"``, ``"error"``, or ``"interrupted"`` (a ``call.start`` with no
    ``call.end``: the process died during the call). ``started``/``ended`` are ISO 8601
    timestamps. Memory figures are the process's at the start and at the end (``None``
    where unknown, and at the start for events of schema 1, which had none);
    :attr:`rss_growth_bytes` is what the process grew by during the call. A failed call's
    ``frames_locals`` holds ``[file, line, function, {name: description}]`` for each frame
    of the user's code in its traceback, outermost first, and a fifth member
    ``{name: value}`` with ``log_args``.
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
    frames_locals: list[Any] | None = None  # checked where read: a bad frame costs only itself
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
    # A Ray Data UDF's call: its operator (``MapBatches(clean)``), and on a batch's end
    # its sizes and the physical operator that ran it (:class:`DataSizes`).
    operator: str | None = None
    data: DataSizes | None = None
    # capture="failures": the failed call's replay file, or why it has none (and, for an
    # actor method, why its state is not in it).
    replay_path: str | None = None
    replay_missing: str | None = None
    replay_state_missing: str | None = None

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


class Submitted(msgspec.Struct, gc=False):
    """What a report reads of a ``call.submit`` record (:class:`Submission` has it all).

    Decoding only these is a quarter cheaper: a report reads one per call. ``large_args``
    (``[where, bytes, serial, type]`` of each argument of a MiB or more passed by value)
    and ``code_bytes`` (a remote function's pickled size, when a MiB or more) are absent
    from most records.
    """

    task_id: str | None = None
    function: str = ""
    kind: str | None = None
    timestamp: str = ""
    actor_id: str | None = None
    parent_call_id: str | None = None
    site: str | None = None
    large_args: list[Any] | None = None  # checked where read: a bad entry costs only itself
    code_bytes: int | None = None


class Submission(Submitted, gc=False):
    """A ``call.submit`` record: one ``.remote()`` of a debuggable, where it was made.

    ``task_id`` is the id of the submitted call's task (its ``call.start`` carries it);
    ``actor_id`` the actor a method goes to, or the actor an ``actor_init`` creates;
    ``parent_call_id`` the submitting call (``None``: the driver, outside calls);
    ``resources`` what it asks to be placed with, in Ray's names (``CPU``, ``GPU``...);
    ``arg_task_ids`` the tasks that produce the refs among its arguments.
    """

    parent_task_id: str | None = None
    job_id: str | None = None
    node_id: str | None = None
    pid: int | None = None
    resources: dict[str, float] = msgspec.field(default_factory=dict)
    scheduling: str | None = None
    max_concurrency: int | None = None
    is_async: bool | None = msgspec.field(default=None, name="async")
    arg_task_ids: list[str] = msgspec.field(default_factory=list)


class Blocked(msgspec.Struct, gc=False):
    """A ``call.blocked`` event: an async call that held its event loop ``held_s``, at least.

    ``where`` is the innermost user frame while it held the loop (the blocking line);
    ``stack`` its user frames, ``[file, line, function, source]``, outermost first.
    """

    timestamp: str = ""
    call_id: str = ""
    function: str = ""
    actor_id: str | None = None
    pid: int | None = None
    held_s: float = 0.0
    where: str | None = None
    thread: str | None = None
    stack: list[list[Any]] = []


class Stuck(msgspec.Struct, gc=False):
    """A ``call.stuck`` event: a call running past its ``stuck_after``, where it was then.

    ``stack`` holds ``[file, line, function, source]`` per user frame, outermost first;
    ``waiting_on`` (``what``, ``refs``, ``task_ids``) what it was blocked on, if anything.
    """

    call_id: str = ""
    function: str = ""
    timestamp: str = ""
    task_id: str | None = None
    actor_id: str | None = None
    node_id: str | None = None
    pid: int | None = None
    running_s: float = 0.0
    stuck_after_s: float = 0.0
    report: int = 1
    thread: str | None = None
    stack: list[list[str | int]] = msgspec.field(default_factory=list)
    waiting_on: dict[str, object] | None = None
