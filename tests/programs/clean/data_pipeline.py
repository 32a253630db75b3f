"""A Ray Data pipeline: 4,000 rows normalized in batches, then one task per block sums them.

Ray Data runs ``normalize`` in its own tasks, streaming; the blocks it makes are handed to
``summarize`` as refs (``to_numpy_refs``), never through the driver.
"""

from __future__ import annotations

import numpy as np
import ray

ROWS = 4_000
BLOCKS = 8


def normalize(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each value scaled into [0, 1), and its square."""
    scaled = batch["id"] / ROWS
    return {"scaled": scaled, "squared": scaled * scaled}


@ray.remote
def summarize(block: dict[str, np.ndarray]) -> tuple[int, float]:
    """A block's row count and the sum of its squares."""
    return len(block["squared"]), float(block["squared"].sum())


def main() -> None:
    ray.init(num_cpus=2)
    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = ray.data.range(ROWS, override_num_blocks=BLOCKS).map_batches(
        normalize, batch_format="numpy"
    )
    parts = ray.get([summarize.remote(block) for block in dataset.to_numpy_refs()])
    rows = sum(count for count, _ in parts)
    print(f"{rows} rows in {len(parts)} blocks, mean square {sum(s for _, s in parts) / rows:.4f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
