"""A keyword Ray Data deprecates: its warning, given when the dataset is built, names this line."""

from __future__ import annotations

import warnings

import numpy as np
import ray


def double(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"] * 2}


def main() -> None:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ray.data.range(4).map_batches(double, max_retries=1)  # WARNS HERE
    for warning in caught:
        if "ray_remote_args" in str(warning.message):
            print(f"warned at {warning.filename}:{warning.lineno}")
    ray.shutdown()


if __name__ == "__main__":
    main()
