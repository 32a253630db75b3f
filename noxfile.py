"""Development sessions: tests, coverage, compat, lint, typecheck, docs, examples, more."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
# uv where it is installed (.ci/run installs it): a fifth of pip's time per session, for
# the same packages; plain venv and pip otherwise.
nox.options.default_venv_backend = "uv|venv"
nox.options.error_on_missing_interpreters = False

HERE = Path(__file__).parent
PYTHON = os.environ.get("NOX_PYTHON")  # None: the interpreter that runs nox
PYPROJECT = nox.project.load_toml(HERE / "pyproject.toml")

# The compatibility session: the oldest supported Ray on one Python, the newest Ray on the
# other supported Pythons (the `tests` session covers the newest Ray on the rest).
COMPAT = [("2.40.0", "3.11"), ("2.60.0", "3.10"), ("2.60.0", "3.12"), ("2.60.0", "3.13")]
# Its subset, the tests marked `compat` in these files: decoration, events, profiling, the
# report, the CLI, attaching to clusters as users start them, tracebacks (the workers' and
# the driver's hook), Ray's own local mode and the kit's. In this order, Ray starts twice:
# whole_program's instrument() and the last file shut it down.
COMPAT_TESTS = [
    "tests/integration/test_decorate.py",
    "tests/integration/test_events.py",
    "tests/integration/test_profiling.py",
    "tests/integration/test_report.py",
    "tests/integration/test_cli.py",
    "tests/integration/test_attach.py",
    "tests/integration/test_traceback_fidelity.py",
    "tests/integration/test_whole_program.py",
    "tests/integration/test_ray_local_mode.py",
    "tests/integration/local/test_actors_as_in_ray.py",
    "tests/integration/local/test_calls_as_in_ray.py",
]
# Attaching to clusters started by `ray start` is Ray's version's matter (its token
# authentication, its address file), not Python's: it runs on the oldest Ray here, on the
# newest in `tests`, and its clusters are half of each other session's time.
RAY_VERSION_ONLY = {"tests/integration/test_attach.py"}
OLDEST_RAY = COMPAT[0][0]


def _interpreter(version: str) -> str | None:
    """Python ``version`` ("3.12"): pyenv's newest install of it, else ``pythonX.Y`` on PATH.

    pyenv's shims for versions that are not active are on PATH too, and fail: a candidate
    counts only if it runs.
    """
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv", "versions")
    installs = sorted(
        root.glob(f"{version}.*/bin/python{version}"),
        key=lambda path: [int(n) for n in re.findall(r"\d+", path.parts[-3])],
    )
    for candidate in [*reversed(installs), shutil.which(f"python{version}")]:
        if candidate is None:
            continue
        runs = subprocess.run([candidate, "-c", ""], capture_output=True, check=False)  # noqa: S603
        if runs.returncode == 0:
            return str(candidate)
    return None


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite against real Ray (nox -s coverage: the same, under coverage)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def coverage(session: nox.Session) -> None:
    """Run the test suite under coverage, Ray's workers measured too (about twice as long)."""
    session.install("-e", ".[test]")
    # coverage run, not pytest-cov: the kit is a pytest plugin, imported before pytest-cov
    # would start. --ray-cov measures the code the kit runs in Ray's workers (_worker/).
    # The pytest script itself, not -m pytest: __main__ stays a script, as tests expect.
    pytest = str(Path(session.bin) / "pytest")
    session.run("coverage", "erase")
    try:
        session.run("coverage", "run", "-p", pytest, "--ray-cov", *session.posargs)
    finally:
        session.run("coverage", "combine", "-q")
        session.run("coverage", "report")


@nox.session
@nox.parametrize(
    ("python", "ray", "version"),
    [nox.param(_interpreter(v), ray, v, id=f"ray{ray}-py{v}") for ray, v in COMPAT],
)
def compat(session: nox.Session, ray: str, version: str) -> None:
    """Run the compatibility subset on the oldest supported Ray and on each supported Python."""
    if session.python is None:  # not found: this check fails, it is never skipped
        session.error(f"Python {version} not found (pyenv install {version}, or put it on PATH)")
    # One resolve; no byte-compiling of Ray's thousands of modules (a third of pip's time;
    # uv never compiles unless asked).
    test_needs = nox.project.dependency_groups(PYPROJECT, "compat")
    no_compile = [] if session.venv_backend == "uv" else ["--no-compile"]
    session.install(*no_compile, "-e", ".", f"ray=={ray}", *test_needs)
    chosen = [t for t in COMPAT_TESTS if ray == OLDEST_RAY or t not in RAY_VERSION_ONLY]
    session.run("pytest", "-m", "compat", *chosen, *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check style with ruff, and the import layers with import-linter (docs/internals.md)."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check the library with mypy --strict."""
    session.install("-e", ".[typecheck]")
    session.run("mypy")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Draw the docs' pictures, then build the Sphinx docs; any warning is an error."""
    session.install("-e", ".[docs]")
    session.run("python", "docs/screenshots.py")  # pictures made from real output
    session.run("python", "docs/depgraph.py")  # the rooms and their imports, from the code
    session.run("python", "docs/otel_waterfall.py")  # a trace, drawn from its OTLP export
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """Render the HTML report and a flame graph in headless Chromium (Debian's, if missing)."""
    if not any(shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")):
        apt = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "update", external=True, env=apt)
        session.run("apt-get", "install", "-y", "chromium", external=True, env=apt)
    session.install("-e", ".[test]")
    session.run("pytest", "tests/browser", *session.posargs)


@nox.session(python=PYTHON)
def terminal(session: nox.Session) -> None:
    """Drive raytrace-kit top in tmux beside a job on a 3-node cluster (installs tmux)."""
    if not shutil.which("tmux"):
        apt = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "update", external=True, env=apt)
        session.run("apt-get", "install", "-y", "tmux", external=True, env=apt)
    session.install("-e", ".[test]")
    session.run("pytest", "tests/terminal", *session.posargs, env={"RAYTRACE_TERMINAL_TESTS": "1"})


@nox.session(python=PYTHON)
def examples(session: nox.Session) -> None:
    """Run every script in examples/ to completion, non-interactively."""
    # notebook_tour.py, pytest_plugin.py, otel_export.py, coverage_of_remote_code.py; and
    # ray_data_pipeline.py: Ray Data needs pandas and pyarrow (what ray[data] adds)
    session.install("-e", ".[notebook,otel,coverage]", "pytest>=8", "pandas>=2", "pyarrow>=14")
    scripts = sorted((HERE / "examples").glob("*.py"))
    if not scripts:
        session.error("no scripts in examples/")
    for script in scripts:
        session.log(f"running {script.name}")
        session.run("python", str(script), env={"PYTHONUNBUFFERED": "1"})
