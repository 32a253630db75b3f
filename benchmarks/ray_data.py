"""Overhead of the kit on a Ray Data pipeline: 200 batches, plain vs instrumented.

One Ray session, interleaved rounds in rotating order, each round building the pipeline
again and running it to the end (``materialize``):
  plain        the UDFs as the user wrote them (twice: the noise floor)
  kit          the same pipeline with the kit on, as under `raytrace-kit run`: each batch a
               recorded call (its sizes, memory, CPU), the class's __init__ once per actor,
               the UDF checked for serializability when the dataset is built
The pipeline: a function (tasks) then a callable class (a pool of two actors), each doing
a few milliseconds of numpy work per batch of 5,000 rows: the shape of a real pipeline's
light stages, where the kit's share of a batch is largest.

Target (issue 40): within 1.05x of plain. Measured: 1.064x (noise floor 1.002x) before the
worker path was made lazy; 1.044x (floor 1.001x) after, on 2026-12-02, 8 rounds, with
1.085x in the same run for actors made to import what they used to. The kit's cost here
is mostly once per actor (two new ones per run), not per batch (docs/ray-data.md, "What
it costs").

Run: python benchmarks/ray_data.py [--calls 200] [--rounds 5] [--max-rounds 30]
"""

from __future__ import annotations

import time

import numpy as np
import ray
from _harness import arguments, cache_bytecode, interleave_until_stable, print_ratios

import raytrace_kit
from raytrace_kit._driver import data_hooks, program

ROWS_PER_BATCH = 5_000


def normalize(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    values = batch["id"].astype(np.float64)
    for _ in range(20):  # a few ms of work
        values = np.sqrt(values * values + 1.0)
    return {"id": batch["id"], "value": values}


class Featurize:
    def __init__(self) -> None:
        self.weights = np.linspace(0.0, 1.0, 64)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        features = np.outer(batch["value"], self.weights).sum(axis=1)
        return {"id": batch["id"], "feature": features}


def run(batches: int, *, kit: bool) -> float:
    data_hooks.state.options_for = program._data_options if kit else None
    start = time.perf_counter()
    dataset = (
        ray.data.range(batches * ROWS_PER_BATCH, override_num_blocks=batches)
        .map_batches(normalize)
        .map_batches(Featurize, compute=ray.data.ActorPoolStrategy(size=2))
    )
    dataset.materialize()
    return time.perf_counter() - start


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__ or "", calls=200, rounds=5)
    raytrace_kit.instrument()  # the hooks in place; each variant says whether they act
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    run(20, kit=True)  # warm: workers started, modules imported
    samples = interleave_until_stable(
        {
            "plain": lambda: run(args.calls, kit=False),
            "plain (2)": lambda: run(args.calls, kit=False),
            "kit": lambda: run(args.calls, kit=True),
        },
        args.rounds,
        args.max_rounds,
        [("plain", "plain (2)")],
    )
    print_ratios("A Ray Data pipeline", samples, args.calls, "plain", "plain (2)")
    ray.shutdown()


if __name__ == "__main__":
    main()
