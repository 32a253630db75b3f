"""A Ray Data pipeline of several stages, as a careful user writes it.

Rows are parsed in tasks, featurized by a pool of two actors that load their "model" once
in ``__init__`` (40 MB, kept for the actor's life: not a leak), filtered row by row, and
written out in batches the driver streams through ``iter_batches``: no stage is far
slower than the others, no batch keeps anything.
"""

from __future__ import annotations

import numpy as np
import ray

ROWS = 8_000
BLOCKS = 40  # 40 small batches per stage: no 'tasks too small' for Ray Data's


def parse(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each id as a value in [0, 1)."""
    return {"id": batch["id"], "value": batch["id"] / ROWS}


class Featurize:
    """A model loaded once per actor, applied to every batch."""

    def __init__(self) -> None:
        self.weights = np.linspace(0.0, 1.0, 5 * 2**20)  # 40 MB, for the actor's life

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "feature": batch["value"] * float(self.weights[-1])}


def keep(row: dict[str, object]) -> bool:
    """Every row but those of one id in ten."""
    return int(row["id"]) % 10 != 0  # type: ignore[call-overload]


def main() -> None:
    ray.init(num_cpus=2)
    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = (
        ray.data.range(ROWS, override_num_blocks=BLOCKS)
        .map_batches(parse)
        .map_batches(Featurize, compute=ray.data.ActorPoolStrategy(size=2))
        .filter(keep)
    )
    total = rows = 0
    for batch in dataset.iter_batches(batch_size=500):
        rows += len(batch["id"])
        total += float(batch["feature"].sum())
    print(f"{rows} rows kept, feature total {total:.1f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
