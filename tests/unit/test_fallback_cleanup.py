"""Runs without Ray: one directory per user in the temp dir, empty runs removed, old ones pruned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from raytrace_kit._output.paths import KEEP_RUNS

WRITE = (
    "import raytrace_kit\nprint(raytrace_kit.log_dir())\nraytrace_kit.get_logger().info('kept')\n"
)


def _run(code: str, tmp: Path | None = None) -> Path:
    """Run ``code`` in a fresh interpreter (its temp dir ``tmp``); the log dir it printed."""
    env = {**os.environ, "TMPDIR": str(tmp)} if tmp is not None else None
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
        env=env,
    )  # fmt: skip
    return Path(done.stdout.strip())


@pytest.mark.parametrize(("writes", "kept"), [(False, False), (True, True)])
def test_the_run_directory_is_kept_only_with_records(
    writes: bool, kept: bool, tmp_path: Path
) -> None:
    """A run that wrote nothing leaves nothing; one with records keeps them, to be read."""
    code = "import raytrace_kit\nprint(raytrace_kit.log_dir())\n" + (
        "raytrace_kit.get_logger().info('kept')\n" if writes else ""
    )
    directory = _run(code, tmp_path)
    assert directory.parent == tmp_path / f"raytrace_kit-{os.getuid()}"
    assert directory.exists() == kept
    if kept:
        assert [f.name for f in directory.glob("events-*.jsonl")]


def test_runs_share_one_directory_and_the_oldest_go(tmp_path: Path) -> None:
    """Many runs leave one entry in the temp dir, holding the newest runs only."""
    made = [_run(WRITE, tmp_path) for _ in range(KEEP_RUNS + 2)]
    assert [p.name for p in tmp_path.iterdir()] == [f"raytrace_kit-{os.getuid()}"]
    kept = sorted(made[0].parent.iterdir())
    assert kept == sorted(made[-KEEP_RUNS:])  # the two oldest runs were removed
    assert oct(made[0].parent.stat().st_mode & 0o777) == "0o700"


def test_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    """A link where the user's directory should be: the run writes to a private one."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / f"raytrace_kit-{os.getuid()}").symlink_to(target)
    directory = _run(WRITE, tmp_path)
    assert directory.parent == tmp_path
    assert directory.name.startswith("raytrace_kit-")
    assert list(target.iterdir()) == []


def test_a_live_runs_directory_is_never_removed(tmp_path: Path) -> None:
    """Concurrent runs (a pool's workers) keep their records however many runs start."""
    parent = tmp_path / f"raytrace_kit-{os.getuid()}"
    parent.mkdir(mode=0o700)
    live = parent / f"20000101-000000-{os.getpid()}-oldest"  # this test's own pid: alive
    live.mkdir()
    (live / "events-nonode-1.jsonl").write_text("{}\n")
    made = [_run(WRITE, tmp_path) for _ in range(KEEP_RUNS + 1)]
    assert live.exists()
    assert made[-1].exists()
    assert not made[0].exists()  # ended runs still go, oldest first
