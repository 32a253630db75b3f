"""Serialization errors: the special_business bug, its report, and the fixed version.

A remote function that uses a global multiprocessing.Pool cannot be shipped to a worker.
Ray's own message arrives late and vague; raytrace_kit checks before submitting and names
the culprit, where it came from, and how to fix it.

Run: python examples/serialization.py   (starts its own local Ray)
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import threading
from typing import Any

import ray

from raytrace_kit import NotSerializableError, check_serializable, debuggable

pool: Any = None  # a module global, created in main() as a script would at the top


@debuggable
@ray.remote
def special_business(values: list[int]) -> list[int]:
    """The bug: `pool` is a module global, created on the driver."""
    return pool.map(abs, values)


@debuggable
@ray.remote
def special_business_fixed(values: list[int]) -> list[int]:
    """The fix: create what cannot travel inside the task (or keep it in an actor)."""
    with multiprocessing.pool.ThreadPool(2) as local_pool:
        return local_pool.map(abs, values)


class Service:
    """An object holding both a pool and a lock: Ray would name only one of them."""

    def __init__(self) -> None:
        self.pool = pool
        self.lock = threading.Lock()


def main() -> None:
    global pool  # noqa: PLW0603 -- the bug this example is about
    pool = multiprocessing.get_context("spawn").Pool(2)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        try:
            special_business.remote([-1, -2])
        except NotSerializableError as exc:
            print("Rejected before submission:\n")
            print(exc.report)
            print()

        print(f"fixed: {ray.get(special_business_fixed.remote([-1, -2]))}\n")

        # On its own, in a notebook or a test: every culprit of an object, not the first.
        print(check_serializable(Service(), name="service"))
        print()
        records = [{"id": 1}, {"id": 2, "guard": threading.Lock()}]
        print(check_serializable(records, name="records"))
    finally:
        ray.shutdown()
        pool.terminate()


if __name__ == "__main__":
    main()
