"""A callable class that keeps 150 MB of each batch (``fixed``: keeps nothing)."""

from __future__ import annotations

import sys

import numpy as np
import ray

KEEP = sys.argv[1:] != ["fixed"]


class Embed:
    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        features = np.ones(150 * 2**20 // 8)  # 150 MB of work per batch
        if KEEP:
            self.seen.append(features)  # the bug: every batch's features kept
        return {"id": batch["id"], "f": batch["id"] * float(features[0])}


def main() -> None:
    ray.init(num_cpus=2)
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(60, override_num_blocks=6).map_batches(
        Embed, compute=ray.data.ActorPoolStrategy(size=1)
    )
    print(sum(int(b["f"].sum()) for b in ds.iter_batches(batch_size=None)))
    ray.shutdown()


if __name__ == "__main__":
    main()
