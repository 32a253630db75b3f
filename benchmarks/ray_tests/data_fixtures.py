"""The fixtures the fetched Ray Data tests ask for: ``ray.data.tests.conftest`` in the work folder.

data_compare.py copies this file into the work folder as ``_ray_data_tests/conftest.py``
(and ``ray.tests.conftest`` star-imports it), so the test files' own
``from ray.data.tests.conftest import *`` and ``from ray.tests.conftest import *`` find
these. Ray's two conftests are not fetched: the stored versions are of other Ray releases
and pull in what is not installed here (moto's S3 mock server, the state API, external
Redis); the few fixtures the chosen tests use are restated instead, each as the stored
``python/ray/data/tests/conftest.py`` or ``python/ray/tests/conftest.py`` defines it, with
the differences noted beside it. ``ConcurrencyCounter`` restates
``ray.data.tests.test_util``'s. Both runs (plain and instrumented) use this same file.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.data.context import DataContext, ShuffleStrategy
from ray.util.debug import reset_log_once

# Ray's get_default_fixture_ray_kwargs(), less its _system_config (test-only settings).
_DEFAULT_RAY_KWARGS = {
    "num_cpus": 1,
    "object_store_memory": 150 * 1024 * 1024,
    "dashboard_port": None,
    "namespace": "default_test_namespace",
}


@contextlib.contextmanager
def _ray_start(**kwargs: Any) -> Iterator[Any]:
    """Ray's ``_ray_start``: a local Ray with the fixture defaults, shut down after."""
    init_kwargs = {**_DEFAULT_RAY_KWARGS, **kwargs}
    address_info = ray.init("local", **init_kwargs)
    try:
        yield address_info
    finally:
        ray.shutdown()


@pytest.fixture
def shutdown_only() -> Iterator[None]:
    """Ray's: the test starts Ray itself; shut it down after."""
    yield None
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_start_regular_shared(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Ray's: one local Ray (1 CPU) for the module's tests that ask for it."""
    param = getattr(request, "param", {})
    with _ray_start(**param) as res:
        yield res


@pytest.fixture(scope="module")
def ray_start_regular_shared_2_cpus(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Ray's: as ``ray_start_regular_shared``, with 2 CPUs."""
    param = getattr(request, "param", {})
    with _ray_start(num_cpus=2, **param) as res:
        yield res


@pytest.fixture
def restore_data_context(request: pytest.FixtureRequest) -> Iterator[DataContext]:
    """Ray Data's: restore any DataContext changes after the test runs."""
    ctx = DataContext.get_current()
    original = copy.deepcopy(ctx)
    yield ctx
    DataContext._set_current(original)


@pytest.fixture
def disable_fallback_to_object_extension(
    request: pytest.FixtureRequest, restore_data_context: DataContext
) -> None:
    """Ray Data's: disables fallback to ArrowPythonObjectType."""
    DataContext.get_current().enable_fallback_to_arrow_object_ext_type = False


# Ray Data's parametrizes over every ShuffleStrategy (five in Ray 2.60, one of them the GPU
# shuffle); two of them here, the sort-based default and the hash shuffle, to keep a run
# of the map_groups tests within minutes on two cores.
SHUFFLE_STRATEGIES = [ShuffleStrategy.SORT_SHUFFLE_PULL_BASED, ShuffleStrategy.HASH_SHUFFLE]


@pytest.fixture(params=SHUFFLE_STRATEGIES, ids=[s.value for s in SHUFFLE_STRATEGIES])
def configure_shuffle_method(request: pytest.FixtureRequest) -> Iterator[ShuffleStrategy]:
    """Ray Data's: run the test with each shuffle strategy."""
    shuffle_strategy = request.param
    ctx = DataContext.get_current()
    original_shuffle_strategy = ctx.shuffle_strategy
    original_default_hash_shuffle_parallelism = ctx.default_hash_shuffle_parallelism
    ctx.shuffle_strategy = shuffle_strategy
    if shuffle_strategy == ShuffleStrategy.HASH_SHUFFLE:
        ctx.default_hash_shuffle_parallelism = 8
    yield request.param
    ctx.shuffle_strategy = original_shuffle_strategy
    ctx.default_hash_shuffle_parallelism = original_default_hash_shuffle_parallelism


# Not in the stored conftest (the tests are newer than it); what its name says: the test
# runs with no block size limit, then with the default one.
@pytest.fixture(params=[None, "default"], ids=["infinite", "default"])
def target_max_block_size_infinite_or_default(
    request: pytest.FixtureRequest, restore_data_context: DataContext
) -> Any:
    ctx = DataContext.get_current()
    if request.param is None:
        ctx.target_max_block_size = None
    return request.param


@pytest.fixture(autouse=True)
def reset_log_once_fixture() -> None:
    """Ray Data's: Ray's log-once warnings are per test."""
    reset_log_once()


@ray.remote(num_cpus=0)
class ConcurrencyCounter:
    """``ray.data.tests.test_util``'s: the most calls between ``inc`` and ``decr`` at once."""

    def __init__(self) -> None:
        self.concurrency = 0
        self.max_concurrency = 0

    def inc(self) -> int:
        self.concurrency += 1
        self.max_concurrency = max(self.max_concurrency, self.concurrency)
        return self.concurrency

    def decr(self) -> int:
        self.concurrency -= 1
        return self.concurrency

    def get_max_concurrency(self) -> int:
        return self.max_concurrency
