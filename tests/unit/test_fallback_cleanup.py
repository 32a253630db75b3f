"""A process without Ray leaves no empty directory behind; one with records keeps it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(("writes", "kept"), [(False, False), (True, True)])
def test_the_fallback_directory_is_kept_only_with_records(writes: bool, kept: bool) -> None:
    code = "import raytrace_kit\nprint(raytrace_kit.log_dir())\n" + (
        "raytrace_kit.get_logger().info('kept')\n" if writes else ""
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    directory = Path(done.stdout.strip())
    assert directory.name.startswith("raytrace_kit-")
    assert directory.exists() == kept
    if kept:
        assert [f.name for f in directory.glob("events-*.jsonl")]
        for file in directory.rglob("*"):
            file.unlink()
        directory.rmdir()
