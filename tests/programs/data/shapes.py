"""Every Ray Data entry point that takes a UDF, once: its output printed, plain or instrumented.

The test runs it plain and under ``raytrace-kit run`` and compares the two outputs: the
kit changes no result, no batch format, no operator name.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import ray


def double(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"], "x": batch["id"] * 2}


def split(batch: pd.DataFrame) -> object:
    yield batch.iloc[: len(batch) // 2]  # a generator UDF: two output batches per input
    yield batch.iloc[len(batch) // 2 :]


def scale(batch: dict[str, np.ndarray], factor: int) -> dict[str, np.ndarray]:
    return {**batch, "x": batch["x"] * factor}


class AddOffset:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "y": batch["x"] + self.offset}


class Clip:
    """A callable object (not a class): Ray Data names its operator after its class."""

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "x": np.minimum(batch["x"], 10_000)}


class AsyncTag:
    async def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "tag": batch["id"] % 3}


def group_sum(group: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"tag": [group["tag"].iloc[0]], "total": [int(group["y"].sum())]})


def main() -> None:
    ray.init(num_cpus=2)
    pool_of_one = ray.data.ActorPoolStrategy(size=1)
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = (
        ray.data.range(200, override_num_blocks=4)
        .map_batches(double)
        .map_batches(split, batch_format="pandas")
        .map_batches(functools.partial(scale, factor=3))
        .map_batches(Clip())
        .map_batches(AddOffset, fn_constructor_args=(7,), compute=pool_of_one)
        .map_batches(AsyncTag, compute=pool_of_one)
        .filter(lambda row: row["id"] % 5 != 0)
        .map(lambda row: {**row, "z": row["y"] - row["x"]})
        .flat_map(lambda row: [row, {**row, "id": row["id"] + 1000}])
        .add_column("w", lambda batch: batch["z"] * 0 + 1)
    )
    rows = sorted(ds.take_all(), key=lambda r: r["id"])
    print(len(rows), rows[0], rows[-1])
    print(sum(int(r["y"]) for r in rows), sum(int(r["w"]) for r in rows))
    groups = ds.groupby("tag").map_groups(group_sum, batch_format="pandas").take_all()
    print(sorted((int(g["tag"]), int(g["total"])) for g in groups))
    plan = ds._logical_plan.dag
    names = []
    while plan is not None:
        names.append(plan.name)
        plan = plan.input_dependencies[0] if plan.input_dependencies else None
    print(" <- ".join(names))  # the operators' names, as Ray Data gives them
    ray.shutdown()


if __name__ == "__main__":
    main()
