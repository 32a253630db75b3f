"""The Ray Data work folder's ``conftest.py``: the chosen tests only, each phase time-limited.

data_compare.py copies this file into the work folder as ``conftest.py``. It keeps, of each
fetched test file, the tests data_compare.py chose (``RAY_TESTS_SELECT``: test function
names, every parametrized case of each) and deselects the rest, and it fails a test
phase (setup, call, teardown) that runs past ``RAY_TESTS_TIMEOUT`` seconds, so that the
session goes on. The fixtures are in ``data_fixtures.py`` (``ray.data.tests.conftest``).
Both runs load this same file.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Generator
from typing import Any

import pytest

TIMEOUT = float(os.environ.get("RAY_TESTS_TIMEOUT", "180"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the chosen tests (by file and function name), deselect the others."""
    chosen_names = {
        (file, name)
        for file, names in json.loads(os.environ["RAY_TESTS_SELECT"]).items()
        for name in names
    }
    chosen, left_out = [], []
    for item in items:
        file, _, rest = item.nodeid.partition("::")
        if (file, rest.split("[")[0]) in chosen_names:
            chosen.append(item)
        else:
            left_out.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = chosen


class _Watchdog:
    """Interrupts this process when one phase of a test runs past :data:`TIMEOUT`."""

    def __init__(self) -> None:
        self.fired = False
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        self.fired = False
        self._timer = threading.Timer(TIMEOUT, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _fire(self) -> None:
        self.fired = True
        os.kill(os.getpid(), signal.SIGINT)  # this pytest process only


_watchdog = _Watchdog()


def _bounded() -> Generator[None, Any, Any]:
    _watchdog.arm()
    try:
        return (yield)
    except KeyboardInterrupt:
        if _watchdog.fired:
            pytest.fail(f"timed out: over {TIMEOUT:.0f} s (harness limit)", pytrace=False)
        raise
    finally:
        _watchdog.disarm()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _bounded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _bounded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, Any, Any]:
    return (yield from _bounded())
