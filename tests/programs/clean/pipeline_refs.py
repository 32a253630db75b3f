"""A pipeline that passes refs: load, clean and featurize 8 shards, then merge; one ray.get.

No stage's value comes back to the driver: each stage is given the ObjectRef of the one
before, Ray runs a call once its inputs exist, and only the merged result is fetched.
"""

from __future__ import annotations

import ray

SHARDS = 8
ROWS = 40_000


@ray.remote
def load(shard: int) -> list[int]:
    """A shard's rows (generated here: in a real job, read from storage)."""
    return [(shard * 7919 + row * 104_729) % 10_007 for row in range(ROWS)]


@ray.remote
def clean(rows: list[int]) -> list[int]:
    """The rows without the invalid ones."""
    return [row for row in rows if row % 11]


@ray.remote
def featurize(rows: list[int]) -> dict[str, float]:
    """A shard's features: count, mean, and the share of large values."""
    count = len(rows)
    return {
        "count": count,
        "mean": sum(rows) / count,
        "large": sum(row > 9_000 for row in rows) / count,
    }


@ray.remote
def merge(*shards: dict[str, float]) -> dict[str, float]:
    """The shards' features combined, weighted by their rows."""
    count = sum(shard["count"] for shard in shards)
    return {
        "count": count,
        "mean": sum(shard["mean"] * shard["count"] for shard in shards) / count,
        "large": sum(shard["large"] * shard["count"] for shard in shards) / count,
    }


def main() -> None:
    ray.init(num_cpus=2)
    loaded = [load.remote(shard) for shard in range(SHARDS)]
    cleaned = [clean.remote(rows) for rows in loaded]
    features = [featurize.remote(rows) for rows in cleaned]
    merged = ray.get(merge.remote(*features))
    print(f"{merged['count']} rows, mean {merged['mean']:.1f}, large {merged['large']:.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
