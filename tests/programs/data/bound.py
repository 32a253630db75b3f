"""Three stages, one of them 0.2 s per batch: the bound of the pipeline.

By default the two stages before it run in operators of their own (held back); with
``fused``, the one before it is fused into its actors.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import ray

BLOCKS = 16


def clean(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"], "x": batch["id"] + 1}


class Enrich:
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "y": batch["x"] * 2}


def score(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    time.sleep(0.2)  # the slow stage: a model, say
    return {**batch, "s": batch["x"] + 1}


class Score:
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        time.sleep(0.2)
        return {**batch, "s": batch["x"] + 1}


def tidy(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"], "s": batch["s"]}


def main() -> None:
    ray.init(num_cpus=2)
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(BLOCKS * 10, override_num_blocks=BLOCKS).map_batches(clean)
    if sys.argv[1:] == ["fused"]:  # clean runs inside Score's actors: one operator
        ds = ds.map_batches(Score, compute=ray.data.ActorPoolStrategy(size=2)).map_batches(tidy)
    else:
        ds = ds.map_batches(Enrich, compute=ray.data.ActorPoolStrategy(size=1)).map_batches(score)
    print(sum(int(b["s"].sum()) for b in ds.iter_batches(batch_size=None)))
    ray.shutdown()


if __name__ == "__main__":
    main()
