"""A UDF that closes over a lock: Ray cannot send it to its workers."""

from __future__ import annotations

import threading

import numpy as np
import ray

lock = threading.Lock()


def tag(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    with lock:
        return batch


def main() -> None:
    ray.init(num_cpus=2)
    ray.data.DataContext.get_current().enable_progress_bars = False
    print(ray.data.range(10).map_batches(tag).count())  # the building line


if __name__ == "__main__":
    main()
