"""One UDF that fails on some batches, one with a batch far larger and slower than the rest.

The failing one is a callable class in a pool of one actor: every batch is a call of the
same actor task, and the batches after a failed one are no retries.
"""

from __future__ import annotations

import time

import numpy as np
import ray


class Parse:
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if batch["id"][0] in (30, 70):  # two blocks of bad rows
            raise ValueError(f"bad row {batch['id'][0]}")
        if batch["id"][0] == 0:  # one block ten times the others: the skew
            return {"id": np.repeat(batch["id"], 10)}
        return batch


def enrich(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if len(batch["id"]) > 50:  # the large block takes far longer than the rest
        time.sleep(1.5)
    return batch


def main() -> None:
    ray.init(num_cpus=2)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.max_errored_blocks = 2  # the bad blocks are let through, the rest goes on
    ds = ray.data.range(100, override_num_blocks=10).map_batches(
        Parse, compute=ray.data.ActorPoolStrategy(size=1)
    )
    ds = ds.map_batches(enrich, num_cpus=0.5)  # num_cpus: an operator of its own
    print(sum(len(b["id"]) for b in ds.iter_batches(batch_size=None)))
    ray.shutdown()


if __name__ == "__main__":
    main()
