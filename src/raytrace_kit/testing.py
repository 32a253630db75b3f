"""pytest plugin for projects that use raytrace_kit (registered as ``pytest11``).

Fixtures:
    ray_local: runs the test in local mode: every debuggable call made by the test runs
        in the test's process, with no Ray cluster, and the previous state is restored
        afterwards. Strict: a plain ``@ray.remote`` call made by the test, which would run
        on a cluster (and start one), raises ``LocalModeError`` naming the function.

Example:
    .. code-block:: python

        def test_transform(ray_local):
            assert ray.get(transform.remote([1, 2])) == [2, 4]
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

__all__ = ["ray_local"]


@pytest.fixture
def ray_local() -> Iterator[None]:
    """Run the test's debuggable calls in this process (strict local mode), then restore."""
    # Imported here: pytest loads this plugin in every session of an environment that
    # has raytrace_kit installed, and importing Ray costs a quarter of a second.
    from raytrace_kit import local_mode  # noqa: PLC0415

    with local_mode(strict=True):
        yield
