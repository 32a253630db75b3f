"""Fixtures of local mode's tests: the plain-Ray side of a table compared with local mode."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import ray

from tests.helpers import run_row, start_shared_ray


@pytest.fixture(scope="class")
def plain(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Any, ...]]:
    """Every row of the class under plain Ray, once, before local mode runs them without Ray.

    For :class:`tests.helpers.AgainstPlainRay`: outcomes by row name.
    """
    start_shared_ray()
    results = {}
    for row in request.cls.ROWS:
        tmp = tmp_path_factory.mktemp(row.__name__)
        results[row.__name__] = run_row(row, ray.remote, tmp)
    for name in ("introspected", "listed-counter"):  # names are free for the next runs
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(name))
    return results
