"""A Ray Data pipeline with a slow stage: the operator that bounds it, named, and the fix.

Three stages: ``parse`` (tasks), ``Enrich`` (a pool of one actor) and ``score`` (tasks,
0.2 s per batch: a model, say). The report's "Ray Data operators" table gives each one's
batches, time per batch, share and memory; its finding names ``MapBatches(score)`` as the
bound and the two stages before it as held back (backpressure). Then a UDF that closes
over a lock is rejected when its dataset is built, before any task starts, with the
captured variable named.

Run: python examples/ray_data_pipeline.py   (starts its own local Ray)
"""

from __future__ import annotations

import threading
import time

import numpy as np
import ray

import raytrace_kit

raytrace_kit.instrument()  # every UDF of this file, as `raytrace-kit run pipeline.py` does


def parse(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"], "x": batch["id"] * 2}


class Enrich:
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "y": batch["x"] + 1}


def score(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    time.sleep(0.2)  # the slow stage
    return {**batch, "s": batch["y"] * 3}


lock = threading.Lock()


def tagged(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    with lock:  # a lock cannot travel to Ray's workers
        return batch


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = (
        ray.data.range(1_600, override_num_blocks=16)
        .map_batches(parse)
        .map_batches(Enrich, compute=ray.data.ActorPoolStrategy(size=1))
        .map_batches(score)
    )
    total = sum(int(batch["s"].sum()) for batch in dataset.iter_batches(batch_size=None))
    print(f"pipeline total: {total}")

    made = raytrace_kit.report(raytrace_kit.log_dir())  # this session's records
    for row in made.data_pipeline:
        print(
            f"{row['operator']:<20} {row['batches']:>3} batches  p50 {row['p50_s']:.3f}s  "
            f"{row['share']:.0%} of the UDF time  in {row['tasks']} tasks, {row['actors']} actors"
        )
    (bound,) = [f for f in made.findings if f.kind == "data_bound"]
    print(f"\n{bound.title}\n  {bound.evidence}\n  Fix: {bound.fix}")
    assert bound.subject.endswith(".score")
    assert "MapBatches(parse)" in bound.evidence

    try:
        ray.data.range(10).map_batches(tagged)
    except raytrace_kit.NotSerializableError as error:
        print(f"\nrejected before any task started:\n{str(error).splitlines()[1].strip()}")
    else:
        msg = "the UDF closing over a lock was not rejected"
        raise AssertionError(msg)
    ray.shutdown()


if __name__ == "__main__":
    main()
