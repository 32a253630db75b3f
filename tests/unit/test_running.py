"""What runs on this machine (``reading/running.py``): a driver's script, never its arguments."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._reports.reading import (
    Cluster,
    RayNode,
    clusters,
    driver_logs,
    script_from_argv,
    script_of,
    shown_script,
)

ARGV = [
    (["/venv/bin/python", "pipeline.py", "--token", "s3cret"], "pipeline.py"),
    (["python3.11", "-u", "-X", "dev", "-W", "ignore", "jobs/run.py", "x"], "jobs/run.py"),
    (["/venv/bin/python", "/venv/bin/pytest", "-q", "-k", "secret"], "/venv/bin/pytest"),
    (["python", "-m", "pytest", "-k", "secret"], "python -m pytest"),
    (["python", "-c", "import os; key='s3cret'"], "python -c"),
    (["python"], "python"),
    (["python", "-", "arg"], "python -"),
    (["/opt/app/server", "--password", "s3cret"], "/opt/app/server"),
    (["ray::IDLE some title"], "ray::IDLE"),
    # raytrace-kit run: the program it runs, its own options and the program's arguments out
    (
        ["/venv/bin/python", "/venv/bin/raytrace-kit", "run", "--log-args", "jobs/etl.py", "-k"],
        "jobs/etl.py",
    ),
    (
        ["python", "-m", "raytrace_kit", "run", "--profile", "memray", "--sample", "app.py"],
        "app.py",
    ),
    (
        ["python", "-m", "raytrace_kit", "run", "--include", "mylib.*", "-m", "jobs.etl", "x"],
        "python -m jobs.etl",
    ),
    (["/venv/bin/python", "/venv/bin/raytrace-kit", "run", "--", "-odd.py"], "-odd.py"),
    (["/venv/bin/python", "/venv/bin/raytrace-kit", "report", "--json"], "/venv/bin/raytrace-kit"),
    (["python", "-m", "raytrace_kit", "top"], "python -m raytrace_kit"),
    ([], None),
]


@pytest.mark.parametrize(("argv", "script"), ARGV, ids=[" ".join(a) or "empty" for a, _ in ARGV])
def test_script_from_argv(argv: list[str], script: str | None) -> None:
    """The script, the module (-m) or the program; -c's code and arguments never."""
    assert script_from_argv(argv) == script


_WORDS = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=12)


@given(
    interpreter=st.sampled_from(["python", "python3", "/usr/bin/python3.11"]),
    options=st.lists(st.sampled_from(["-u", "-O", "-B", "-E", "-s"]), max_size=3),
    script=_WORDS.map(lambda word: f"/work/{word}.py"),
    secrets=st.lists(_WORDS.map(lambda word: f"SECRET{word}"), min_size=1, max_size=4),
)
def test_arguments_are_never_part_of_it(
    interpreter: str, options: list[str], script: str, secrets: list[str]
) -> None:
    """Whatever follows the script stays out of what is shown."""
    found = script_from_argv([interpreter, *options, script, *secrets])
    assert found == script
    assert "SECRET" not in found


@pytest.mark.parametrize(
    ("script", "shown"),
    [("/work/jobs/pipeline.py", "pipeline.py"), ("python -m pytest", "python -m pytest")],
)
def test_shown_script(script: str, shown: str) -> None:
    """A path by its file's name; a module as it is."""
    assert shown_script(script) == shown


def test_this_process_is_seen_and_a_reused_pid_is_not() -> None:
    """A driver's script while it runs; a process younger than the driver is not it."""
    assert script_of(os.getpid(), time.time()) == script_from_argv(
        Path("/proc/self/cmdline").read_bytes().decode().split("\0")[:-1]
    )
    assert script_of(os.getpid(), time.time() - 3600) is None  # started since


def test_clusters_group_the_nodes_by_address() -> None:
    """One cluster per GCS address, with its nodes on this machine; gcs_server is no node."""
    one, two = Path("/r/session_2026-01-01_00-00-00_000000_1"), Path("/x/session_b")
    processes = [
        RayNode(10, "gcs_server", one, None, None),
        RayNode(11, "raylet", one, "10.0.0.1:6379", "aa"),
        RayNode(12, "raylet", one, "10.0.0.1:6379", "bb"),
        RayNode(20, "raylet", two, "10.0.0.1:6380", "cc"),
    ]
    assert clusters(processes) == [
        Cluster("10.0.0.1:6379", one, 2),
        Cluster("10.0.0.1:6380", two, 1),
    ]


def test_a_drivers_log_names_its_pid_and_when_it_connected(tmp_path: Path) -> None:
    """python-core-driver-<worker id>_<pid>.log: the job, the pid, its first line's time."""
    worker = "02000000" + "f" * 48
    (tmp_path / f"python-core-driver-{worker}_4242.log").write_text(
        "[2026-11-25 11:38:00,037 I 4242 4242] core_worker_process.cc:872: Constructing\n"
    )
    (tmp_path / "python-core-worker-abc_17.log").write_text("")
    ((job, pid, connected),) = driver_logs(tmp_path)
    assert (job, pid) == ("02000000", 4242)
    assert connected is not None
    assert time.localtime(connected)[:6] == (2026, 11, 25, 11, 38, 0)
