"""pytest plugin for projects that use raytrace_kit (registered as ``pytest11``).

Fixtures and markers:
    ``ray_local``: runs the test in local mode: every debuggable call made by the test
        runs in the test's process, with no Ray cluster, and the previous state is restored
        afterwards. Strict: a plain ``@ray.remote`` call made by the test, which would run
        on a cluster (and start one), raises ``LocalModeError`` naming the function.

    ``@pytest.mark.ray_local``: the same, for a test or a class, without the fixture.

Options:
    ``--ray-local``: every test of the session in strict local mode.

    ``--no-raytrace-summary``: no summary of failed and slowest debuggable calls.

    ``--ray-cov``: coverage measured inside Ray's workers too (with pytest-cov's ``--cov``,
        its report includes them; alone, data files for ``coverage combine``).

Nothing here imports Ray until a test asks for local mode or the session ran
debuggable calls: the plugin loads in every pytest session of an environment that has
raytrace_kit installed.

Example:
    .. code-block:: python

        def test_transform(ray_local):
            assert ray.get(transform.remote([1, 2])) == [2, 4]

        @pytest.mark.ray_local
        def test_load():
            assert ray.get(load.remote("a.csv")).shape == (3, 2)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ray_local", "reset"]

_SUMMARY_ROWS = 5


def reset() -> None:
    """Return raytrace_kit to a fresh process's state: for tests that check the kit itself.

    Closes the event files, removes the ``ray.*`` hooks of local mode, ends local actors,
    and forgets every setting and cache the kit keeps in this process. Ray itself is left
    as it is.

    Example:
        .. code-block:: python

            @pytest.fixture(autouse=True)
            def fresh_kit():
                yield
                raytrace_kit.testing.reset()
    """
    from raytrace_kit import _registry  # noqa: PLC0415 -- the plugin loads nothing until used

    _registry.reset()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("raytrace_kit")
    group.addoption(
        "--ray-local",
        action="store_true",
        help="run every test in raytrace_kit's strict local mode (no Ray cluster)",
    )
    group.addoption(
        "--raytrace-instrument",
        action="store_true",
        help="instrument every Ray remote of the code under test (as raytrace-kit run does; "
        "RAYTRACE_KIT_INSTRUMENT=... gives options)",
    )
    group.addoption(
        "--ray-cov",
        action="store_true",
        help="measure coverage inside Ray's workers too, for pytest-cov's report (--cov) "
        "or, alone, as data files for coverage combine",
    )
    group.addoption(
        "--no-raytrace-summary",
        action="store_true",
        help="leave out the summary of failed and slowest debuggable calls",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ray_local: run the test in raytrace_kit's strict local mode (no cluster)"
    )
    config.stash[_STARTED] = datetime.now(timezone.utc)
    setting = os.environ.get("RAYTRACE_KIT_INSTRUMENT", "")
    if config.getoption("raytrace_instrument") or setting:
        # Every remote of the code under test instrumented, as raytrace-kit run does.
        from raytrace_kit._driver import program  # noqa: PLC0415 -- only when asked

        program.instrument(**program.options_from_env(setting or "1"))
    if config.getoption("ray_cov"):
        from raytrace_kit._driver import coverage  # noqa: PLC0415 -- only when asked
        from raytrace_kit.exceptions import CoverageError  # noqa: PLC0415

        try:
            config.stash[_COVERAGE] = coverage.start_run()
        except CoverageError as exc:
            msg = f"--ray-cov: {exc}"
            raise pytest.UsageError(msg) from exc


_STARTED = pytest.StashKey[datetime]()
_COVERAGE = pytest.StashKey[Any]()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """With ``--ray-cov``: the workers save before pytest-cov combines (it wraps outside)."""
    try:
        return (yield)
    finally:
        run = session.config.stash.get(_COVERAGE, None)
        if run is not None:
            run.stop()


@pytest.fixture
def ray_local() -> Iterator[None]:
    """Run the test's debuggable calls in this process (strict local mode), then restore."""
    # Imported here: pytest loads this plugin in every session of an environment that
    # has raytrace_kit installed, and importing Ray costs a quarter of a second.
    from raytrace_kit import local_mode  # noqa: PLC0415

    with local_mode(strict=True):
        yield


@pytest.fixture(autouse=True)
def _raytrace_kit_local_marker(request: pytest.FixtureRequest) -> None:
    """``@pytest.mark.ray_local`` and ``--ray-local``: the ``ray_local`` fixture, unnamed."""
    if request.node.get_closest_marker("ray_local") is not None or request.config.getoption(
        "ray_local"
    ):
        request.getfixturevalue("ray_local")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """A short summary of the session's failed and slowest debuggable calls."""
    run = config.stash.get(_COVERAGE, None)
    if run is not None:
        terminalreporter.write_line(
            f"raytrace_kit --ray-cov: {run.workers} of Ray's processes measured, "
            f"their data files beside {run.data_file}"
        )
    if config.getoption("no_raytrace_summary") or "raytrace_kit._driver.proxy" not in sys.modules:
        return  # no debuggable object was ever made: nothing to say, nothing to import
    try:
        lines = _summary(config.stash[_STARTED])
    except Exception as exc:
        lines = [f"(no summary: {type(exc).__name__}: {exc})"]
    if lines:
        terminalreporter.write_sep("-", "raytrace_kit: debuggable calls")
        for line in lines:
            terminalreporter.write_line(line)


def _summary(since: datetime) -> list[str]:
    from raytrace_kit._output import state as _output_state  # noqa: PLC0415
    from raytrace_kit._reports.reading import Session  # noqa: PLC0415
    from raytrace_kit._reports.run import report  # noqa: PLC0415

    state = _output_state.state
    folders = {d for d in (state.last_ray_log_dir, state.fallback_dir) if d is not None}
    files = sorted(
        {f for d in folders if Path(d).is_dir() for f in Path(d).rglob("events-*.jsonl")}
    )
    if not files:
        return []
    made = report(Session(sorted(folders)[0], files), since=since)
    if not made.overview["calls"]:
        return []
    o = made.overview
    lines = [f"{o['calls']} calls, {o['failed']} failed, {o['interrupted']} interrupted"]
    for failure in made.failures[:_SUMMARY_ROWS]:
        lines.append(f"  failed: {failure['function']} {failure['error_type']} x{failure['count']}")
    for slow in made.slowest[:_SUMMARY_ROWS]:
        lines.append(
            f"  slowest: {slow['function']} x{slow['count']}, p95 {slow['p95_s']:.3f}s, "
            f"max {slow['max_s']:.3f}s"
        )
    lines.extend(f"  more: raytrace-kit report {folder}" for folder in sorted(folders))
    return lines
