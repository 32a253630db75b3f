"""Ray's records of worker exits, read as the report reads them.

``tests/data/ray_logs_oom/gcs_server.out`` is the head node's log, verbatim, of a real Ray
2.60 run whose task was killed by Ray's memory monitor (threshold lowered to 2%, so no
memory had to be exhausted). The other kinds of death are tested with real Ray in
tests/integration/test_report.py.
"""

from __future__ import annotations

from pathlib import Path

from raytrace_kit._reports.explain import find_ray_logs, worker_deaths

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


def test_a_crash_is_read_from_its_workers_err_file_listed_once(tmp_path: Path) -> None:
    """Two workers died: one's .err (moved to logs/old) shows SIGSEGV, the other has none."""
    crashed, killed = "c1" * 28, "d2" * 28
    record = (
        "[2026-11-25 10:00:0{n},123 I 123 456] (gcs_server) gcs_worker_manager.cc:70: Reporting "
        "worker exit, worker id = {w}, node id = {node}, address = 10.0.0.1, exit_type = "
        "SYSTEM_ERROR, exit_detail = Worker unexpectedly exits with a connection error code 2. "
        "End of file.\n"
    )
    (tmp_path / "gcs_server.out").write_text(
        record.format(n=1, w=crashed, node="ab" * 28) + record.format(n=2, w=killed, node="ab" * 28)
    )
    (tmp_path / "old").mkdir()
    err = tmp_path / "old" / f"worker-{crashed}-01000000-4242.err"
    err.write_text("Fatal Python error: Segmentation fault\n*** SIGSEGV received at time=17\n")
    (tmp_path / f"worker-{killed}-01000000-4243.err").write_text("nothing fatal here\n")
    deaths = worker_deaths(tmp_path, [crashed, killed])
    assert deaths[crashed].kind == "crash"
    assert deaths[crashed].err_file == str(err)
    assert deaths[killed].kind == "killed"
    assert deaths[killed].err_file is None
