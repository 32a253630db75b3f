"""call.start and call.end as msgspec Structs, in the kit's member order (for the benchmarks
that compare msgspec's encoder with the kit's renderers)."""

from __future__ import annotations

import msgspec


class Common(msgspec.Struct):
    """The members call.start and call.end share, in the kit's order."""

    timestamp: str
    level: str
    event: str
    schema: int
    call_id: str
    parent_call_id: str | None
    parent_task_id: str | None
    function: str
    kind: str
    mode: str
    task_id: str | None
    task_name: str | None
    actor_id: str | None
    job_id: str | None
    node_id: str | None
    worker_id: str | None
    pid: int
    attempt: int | None


class Start(Common):
    """call.start's own members."""

    rss_bytes: int | None
    rss_minus_shr_bytes: int | None
    max_rss_bytes: int | None


class End(Common):
    """call.end's own members (a call that returned)."""

    duration_s: float
    cpu_s: float | None
    process_cpu_s: float | None
    status: str
    rss_bytes: int | None
    rss_minus_shr_bytes: int | None
    max_rss_bytes: int | None
    rss_start_bytes: int | None
