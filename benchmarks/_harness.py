"""Shared by the benchmarks: interleaved rounds in rotating order, and medians."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path

# Bytecode for every benchmark's processes, kept between runs. Where PYTHONDONTWRITEBYTECODE
# is set (this machine sets it), each new process (a Ray worker, a CLI run, a fresh
# interpreter) compiles the kit again, about 75 ms, which swamps what a benchmark measures.
PYCACHE = Path(tempfile.gettempdir()) / "raytrace-kit-bench-pycache"


def cache_bytecode(env: MutableMapping[str, str] = os.environ) -> None:
    """Let processes started from here keep their bytecode (in :data:`PYCACHE`, not the tree).

    ``env`` is this process's environment by default, which Ray's workers and subprocesses
    inherit: call it first thing in a benchmark's ``main()``.
    """
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)


def source_of(before: str, temp: Path) -> Path:
    """The ``src`` directory of ``before``: a directory as given, or a git ref checked out.

    For a variant ``--before REF``: the kit as it was at that commit, in ``temp``.
    """
    if Path(before).is_dir():
        return Path(before).resolve()
    git = shutil.which("git")
    if git is None:
        msg = f"--before {before}: not a directory, and no git to read it as a ref"
        raise SystemExit(msg)
    repository = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        [git, "-C", str(repository), "archive", before, "src"], capture_output=True, check=True
    )
    tree = temp / "before"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as files:
        files.extractall(tree, filter="data")
    return tree / "src"


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


def interleave_until_stable(
    variants: dict[str, Callable[[], float]],
    rounds: int,
    max_rounds: int,
    floors: list[tuple[str, str]],
    tolerance: float = 0.03,
) -> dict[str, list[float]]:
    """:func:`interleave`, then more rounds until each noise floor is within ``tolerance``.

    ``floors`` pairs two identical variants: their median ratio is the noise floor of the
    run, and a ratio between two kit variants means nothing until it is small. Stops at
    ``max_rounds`` whatever the floor (the report prints it, so a noisy run shows as such).
    """
    samples = interleave(variants, rounds)
    while len(next(iter(samples.values()))) < max_rounds:
        if all(abs(floor(samples, a, b) - 1) <= tolerance for a, b in floors):
            break
        more = interleave(variants, min(rounds, max_rounds - len(samples[floors[0][0]])))
        for label, values in more.items():
            samples[label].extend(values)
    return samples


def floor(samples: dict[str, list[float]], a: str, b: str) -> float:
    """The median ratio of two identical variants: the noise floor."""
    return statistics.median(samples[b]) / statistics.median(samples[a])


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    """The median of each variant's samples."""
    return {label: statistics.median(values) for label, values in samples.items()}


def print_ratios(
    title: str, samples: dict[str, list[float]], n: int, base: str, twin: str, *, width: int = 18
) -> None:
    """Each variant's median, per call, and its ratio to ``base``; then the noise floor.

    ``twin`` is the variant identical to ``base``: their ratio is the floor under which a
    difference means nothing.
    """
    reference = statistics.median(samples[base])
    print(f"\n{title} ({n} calls, median of {len(samples[base])} interleaved rounds)")
    for label, values in samples.items():
        med = statistics.median(values)
        print(
            f"  {label:<{width}} {med * 1e3:8.1f} ms  {med / n * 1e6:7.1f} us/call  "
            f"ratio {med / reference:5.3f}x {base}"
        )
    print(f"  noise floor ({twin} / {base}): {floor(samples, base, twin):5.3f}x")


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
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=rounds * 6,
        help="keep adding rounds until two identical variants agree within 3%% (or this)",
    )
    return parser.parse_args()


def actor_calls(handle: object, n: int) -> float:
    """Wall seconds of ``n`` calls of ``handle.echo``, submitted together, then one ``ray.get``."""
    import ray  # noqa: PLC0415 -- only the Ray benchmarks need it

    start = time.perf_counter()
    ray.get([handle.echo.remote(i) for i in range(n)])  # type: ignore[attr-defined]
    return time.perf_counter() - start
