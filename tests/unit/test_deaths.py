"""Ray's records of worker exits, read as the report reads them.

``tests/data/ray_logs_oom/gcs_server.out`` is the head node's log, verbatim, of a real Ray
2.60 run whose task was killed by Ray's memory monitor (threshold lowered to 2%, so no
memory had to be exhausted). The other kinds of death are tested with real Ray in
tests/integration/test_report.py.
"""

from __future__ import annotations

from pathlib import Path

from raytrace_kit._reports.deaths import find_ray_logs, worker_deaths

RECORDED = Path(__file__).parent.parent / "data" / "ray_logs_oom"
KILLED = "ed7d0a793a26269a9269fc75ce277627f7d227bdca6cf2cbde6386d7"


def test_an_oom_kill_by_ray_memory_monitor_is_named_with_the_node_memory() -> None:
    deaths = worker_deaths(RECORDED, [KILLED, "0" * 56])
    assert list(deaths) == [KILLED]  # the other worker has no record: absent, not guessed
    death = deaths[KILLED]
    assert death.exit_type == "NODE_OUT_OF_MEMORY"
    assert death.kind == "oom"
    assert death.cause == (
        "killed by Ray's memory monitor: the node was running out of memory "
        "(0.75GB used / 23.54GB limit (0.031657))"
    )
    assert "num_cpus= or memory= per task" in death.fix
    # The record spans lines; the detail keeps Ray's words up to the next record.
    assert "Selected to kill: (Task: job ID=01000000" in death.detail
    assert "pid=23154" in death.detail


def test_logs_are_found_from_the_places_a_session_is_opened(tmp_path: Path) -> None:
    logs = tmp_path / "session_x" / "logs"
    (logs / "raytrace_kit").mkdir(parents=True)
    (logs / "gcs_server.out").write_text("")
    assert find_ray_logs(tmp_path / "session_x") == logs
    assert find_ray_logs(logs / "raytrace_kit") == logs
    assert find_ray_logs(tmp_path / "elsewhere") is None


def test_no_wanted_workers_reads_nothing() -> None:
    assert worker_deaths(RECORDED, [None, ""]) == {}  # type: ignore[list-item]
