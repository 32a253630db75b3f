"""Fixtures of the integration tier: one Ray instance, shared by the tests that ask for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray

from tests.helpers import start_shared_ray


@pytest.fixture
def ray_session() -> None:
    """A running Ray instance, shared by every test that asks for it.

    Started once; restarted only after a test that needed its own cluster shut it down.
    """
    start_shared_ray()


@pytest.fixture(scope="session", autouse=True)
def _shutdown_ray_at_exit() -> Iterator[None]:
    yield
    if ray.is_initialized():
        ray.shutdown()
