"""Fixtures of both tiers: each test's fresh state and event window, and Ray shut down.

The Ray fixtures only integration tests use are in ``integration/conftest.py``; plain
functions tests share are in ``helpers.py``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
import ray

from raytrace_kit import testing
from raytrace_kit._output import state as output_state
from tests import helpers

# Workers inherit the environment of the ray.init() that starts the local cluster; a
# developer's own override must not redirect the files these tests look for.
os.environ.pop("RAYTRACE_LOG_DIR", None)


@pytest.fixture
def no_ray() -> None:
    """Ray is not initialized (the shared instance is shut down; later tests restart it)."""
    if ray.is_initialized():
        ray.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the unit tier (tests/unit, no Ray) first: it finishes in seconds, before Ray starts."""
    items.sort(key=lambda item: "unit" not in item.path.parts)


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    """Each test starts with raytrace_kit's process state reset and a new event window."""
    testing.reset()
    helpers.open_window()
    yield
    fallback = output_state.state.fallback_dir  # made by this test (Ray not initialized)
    testing.reset()
    if fallback is not None:
        shutil.rmtree(fallback, ignore_errors=True)
