"""Shared by the benchmarks: interleaved rounds in rotating order, and medians."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable


def interleave(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run every variant once per round, rotating the order each round.

    Whichever variant runs first in a round is measurably faster on 2 cores: rotating
    keeps that from always favouring the same one. Each variant returns its own timing.
    """
    samples: dict[str, list[float]] = {label: [] for label in variants}
    labels = list(variants)
    for round_no in range(rounds):
        shift = round_no % len(labels)
        for label in labels[shift:] + labels[:shift]:
            samples[label].append(variants[label]())
    return samples


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    """The median of each variant's samples."""
    return {label: statistics.median(values) for label, values in samples.items()}


def per_call(fn: Callable[[], object], n: int) -> float:
    """Seconds per call of ``fn``, over ``n`` calls in a row."""
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def arguments(doc: str, calls: int, rounds: int) -> argparse.Namespace:
    """Parse ``--calls`` and ``--rounds`` (with these defaults) for a benchmark script."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--rounds", type=int, default=rounds)
    return parser.parse_args()
