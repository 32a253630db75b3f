"""The pytest plugin, as a project uses it: a test file of its own, run by pytest.

Writes a small test module into a temporary project (debuggable functions, a test with
the ray_local fixture, one with @pytest.mark.ray_local, one that makes a plain Ray call in
strict local mode), runs pytest on it in a subprocess, and shows what pytest prints: the
failing test's LocalModeError naming the plain function, and the end-of-session summary
of the debuggable calls.

Run: python examples/pytest_plugin.py   (needs pytest; starts no Ray cluster)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = """
import pytest
import ray

from raytrace_kit import debuggable


@debuggable
@ray.remote
def double(x):
    return 2 * x


@ray.remote
def plain(x):
    return x


def test_with_the_fixture(ray_local):
    assert ray.get(double.remote(21)) == 42


@pytest.mark.ray_local
def test_with_the_marker():
    assert ray.get([double.remote(i) for i in range(3)]) == [0, 2, 4]


@pytest.mark.ray_local
def test_a_plain_call_is_refused():
    with pytest.raises(Exception, match="plain"):
        plain.remote(1)  # strict: would start a cluster
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as project:
        (Path(project) / "test_pipeline.py").write_text(TESTS)
        done = subprocess.run(  # noqa: S603 -- this interpreter, our own arguments
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", project],
            capture_output=True,
            text=True,
            check=False,
            cwd=project,
        )
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    assert "raytrace_kit: debuggable calls" in done.stdout


if __name__ == "__main__":
    main()
