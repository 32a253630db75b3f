"""Development sessions: tests, lint, typecheck, docs, examples, browser, terminal (``nox -l``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = False

HERE = Path(__file__).parent
PYTHON = os.environ.get("NOX_PYTHON")  # None: the interpreter that runs nox


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite against real Ray, and report coverage with Ray's workers' included."""
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
    # notebook_tour.py, pytest_plugin.py, otel_export.py, coverage_of_remote_code.py
    session.install("-e", ".[notebook,otel,coverage]", "pytest>=8")
    scripts = sorted((HERE / "examples").glob("*.py"))
    if not scripts:
        session.error("no scripts in examples/")
    for script in scripts:
        session.log(f"running {script.name}")
        session.run("python", str(script), env={"PYTHONUNBUFFERED": "1"})
