"""One task on a single-node cluster the test starts itself (run by test_coverage.py)."""

from __future__ import annotations

import ray
from sample import work


def test_one_task() -> None:
    ray.init(address="local", num_cpus=1)
    try:
        assert ray.get(ray.remote(work.classify).remote(-3)) == "negative"
    finally:
        ray.shutdown()
