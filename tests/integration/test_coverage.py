"""Coverage of remote code: ``pytest --ray-cov`` and ``raytrace_kit.coverage()``, as users run them.

Each pytest session and script runs in a subprocess of its own, in a fresh directory with
the sample package (tests/programs/coverage_sample), as a user's project would. Covered
lines and branches are read with coverage.py's own data API, never from a percentage.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from coverage import CoverageData

SAMPLE = Path(__file__).parents[1] / "programs" / "coverage_sample"
DEADLINE = 600  # seconds for one subprocess on a busy machine (a 2-node cluster: ~20 s)


def _project(tmp_path: Path) -> Path:
    """A user's project: the sample package and the test files that call it."""
    for item in SAMPLE.iterdir():
        if item.name == "__pycache__":
            continue
        if item.is_dir():
            shutil.copytree(
                item, tmp_path / item.name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(item, tmp_path / item.name)
    return tmp_path


def _environment(**extra: str) -> dict[str, str]:
    """This environment without any coverage settings of an outer run (ours included)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START"}
    }
    env.update(extra)
    return env


def _run(
    cwd: Path, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGUMENTS`` in ``cwd``, as a user runs it."""
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=cwd,
        env=env or _environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def _pytest(
    cwd: Path, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return _run(cwd, "-m", "pytest", "-p", "no:cacheprovider", "-q", *arguments, env=env)


def _measured(data_file: Path, source: Path) -> tuple[set[int], set[tuple[int, int]]]:
    """The lines and arcs of ``source`` in a coverage data file."""
    data = CoverageData(str(data_file))
    data.read()
    return set(data.lines(str(source)) or ()), set(data.arcs(str(source)) or ())


def _body_lines(source: Path, function: str) -> set[int]:
    """The line numbers of the body of ``def function`` in ``source`` (no signature)."""
    lines = source.read_text().splitlines()
    start = next(
        i for i, line in enumerate(lines) if re.match(rf"\s*(async )?def {function}\(", line)
    )
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = set()
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        if line.strip():
            body.add(number)
    return body


class TestPytestRayCov:
    """``pytest --cov --ray-cov``: the report includes what Ray's workers ran."""

    @pytest.mark.cluster
    def test_remote_lines_and_branches_are_those_of_the_same_calls_in_process(
        self, tmp_path: Path
    ) -> None:
        project = _project(tmp_path)
        work = project / "sample" / "work.py"
        remote = _pytest(
            project,
            "--cov=sample",
            "--cov-branch",
            "--cov-report=term-missing",
            "--cov-report=html",
            "--ray-cov",
            "ray_calls.py",
        )
        assert remote.returncode == 0, remote.stdout + remote.stderr
        (project / ".coverage").rename(project / "ray.coverage")
        local = _pytest(project, "--cov=sample", "--cov-branch", "local_calls.py")
        assert local.returncode == 0, local.stdout + local.stderr

        ray_lines, ray_arcs = _measured(project / "ray.coverage", work)
        local_lines, local_arcs = _measured(project / ".coverage", work)
        assert ray_lines == local_lines
        # The one difference: a worker that os._exit ends never leaves pause_then_exit
        # (in process, the test's stand-in for os._exit raises, and leaves it).
        text = work.read_text().splitlines()
        exit_line = next(n for n in _body_lines(work, "pause_then_exit") if "_exit" in text[n - 1])
        leaving = {arc for arc in local_arcs if arc[0] == exit_line and arc[1] < 0}
        assert len(leaving) == 1
        assert local_arcs - ray_arcs == leaving
        assert ray_arcs <= local_arcs
        # Code that only a worker ran: each kind of call, the killed actor's, the ended task's.
        for function in (
            "classify",
            "squares",
            "on_second_node",
            "add",
            "note",
            "touch",
            "pause_then_exit",
        ):
            assert _body_lines(work, function) & ray_lines, function
        # pytest-cov's own reports show them.
        row = next(line for line in remote.stdout.splitlines() if line.startswith("sample/work.py"))
        assert row.split()[2] == "1", row  # one statement missed, as in process: x > 100
        page = next((project / "htmlcov").glob("*work_py.html")).read_text()
        for number in _body_lines(work, "note"):  # a threaded actor's method
            assert re.search(
                rf'<p class="[^"]*\brun\b[^"]*"><span class="n"><a id="t{number}"', page
            ), number
        said = re.search(
            r"--ray-cov: (\d+) of Ray's processes measured, .* beside (\S+)", remote.stdout
        )
        assert said is not None, remote.stdout
        assert int(said[1]) >= 3  # a worker on each node at least, and the actors'
        assert said[2] == str(project / ".coverage")  # where pytest-cov combines from

    def test_without_ray_cov_nothing_changes(self, tmp_path: Path) -> None:
        project = _project(tmp_path)
        work = project / "sample" / "work.py"
        done = _pytest(project, "--cov=sample", "--cov-branch", "one_task.py")
        assert done.returncode == 0, done.stdout + done.stderr
        lines, _ = _measured(project / ".coverage", work)
        assert not _body_lines(work, "classify") & lines  # the worker's lines: not measured
        assert min(_body_lines(work, "classify")) - 1 in lines  # the driver's (def) are
        assert not list(project.glob(".coverage.*"))
        assert "--ray-cov" not in done.stdout

    def test_ray_cov_alone_writes_data_files_for_coverage_combine(self, tmp_path: Path) -> None:
        project = _project(tmp_path)
        work = project / "sample" / "work.py"
        (project / "pyproject.toml").write_text(
            '[tool.coverage.run]\nsource = ["sample"]\nbranch = true\n'
        )
        done = _pytest(project, "--ray-cov", "one_task.py")
        assert done.returncode == 0, done.stdout + done.stderr
        combined = _run(project, "-m", "coverage", "combine")
        assert combined.returncode == 0, combined.stdout + combined.stderr
        lines, arcs = _measured(project / ".coverage", work)
        classify = sorted(_body_lines(work, "classify"))
        assert {classify[0], classify[1]} <= lines  # if n < 0: return "negative"
        assert classify[2] not in lines
        assert (classify[0], classify[1]) in arcs  # branch = true, from pyproject.toml

    def test_plugin_turned_off_knows_no_ray_cov(self, tmp_path: Path) -> None:
        done = _pytest(_project(tmp_path), "-p", "no:raytrace_kit", "--ray-cov", "one_task.py")
        assert done.returncode == 4
        assert "unrecognized arguments: --ray-cov" in done.stderr

    def test_without_coverage_installed_ray_cov_says_how_to_install_it(
        self, tmp_path: Path
    ) -> None:
        project = _project(tmp_path)
        hidden = project / "hide"
        (hidden / "coverage").mkdir(parents=True)
        (hidden / "coverage" / "__init__.py").write_text("raise ImportError('not installed')\n")
        env = _environment(PYTHONPATH=str(hidden))
        done = _pytest(project, "-p", "no:pytest_cov", "--ray-cov", "one_task.py", env=env)
        assert done.returncode == 4, done.stdout + done.stderr
        assert "--ray-cov: coverage of remote code needs coverage.py" in done.stderr
        assert "pip install coverage" in done.stderr


class TestScripts:
    """``with raytrace_kit.coverage(...)`` around a script's work."""

    def test_script_data_includes_the_workers_lines(self, tmp_path: Path) -> None:
        project = _project(tmp_path)
        work = project / "sample" / "work.py"
        (project / "pyproject.toml").write_text('[tool.coverage.run]\nsource = ["sample"]\n')
        done = _run(project, "script.py")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[0] == "10"
        lines, _ = _measured(project / "script.coverage", work)
        assert _body_lines(work, "add") & lines
        assert min(_body_lines(work, "__init__")) in lines  # the actor's constructor

    def test_a_cluster_started_outside_cannot_be_measured(self, tmp_path: Path) -> None:
        project = _project(tmp_path)
        outside = subprocess.Popen(
            [sys.executable, "outside_cluster.py"],
            cwd=project,
            env=_environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert outside.stdout is not None
            address = outside.stdout.readline().strip()
            done = _run(project, "script.py", address)
        finally:
            assert outside.stdin is not None
            outside.stdin.close()
            outside.wait(timeout=DEADLINE)
        assert done.returncode == 3, done.stdout + done.stderr
        message = done.stdout
        assert f"cannot reach the workers of the Ray cluster at {address}" in message
        assert "Start the cluster inside the run" in message
