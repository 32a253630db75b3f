"""How soon top and tail show what happened on another node (the issue's "within 2 s").

A 3-node ``ray.cluster_utils.Cluster`` (nodes 1 and 2 with directories of their own)
runs a steady job (calls of ``work`` on every node); this process watches it as
``raytrace-kit top`` does (a refresh every --interval seconds, in a thread) and as
``raytrace-kit tail`` does (every node's new lines every 0.5 s, in another thread). A
call that fails on node 2 is made --trials times; for each the delay from its
``call.end`` (the time written in it) to the refresh that first shows it, and to the
moment tail prints it, is measured on this machine's clock.

Run: python benchmarks/live_latency.py [--trials 10] [--interval 1.0]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import ray

from raytrace_kit import debuggable
from raytrace_kit._driver import live

sys.path.insert(0, str(Path(__file__).parents[1]))  # the tests' cluster of separate nodes
from tests.helpers import node_cluster


@debuggable
@ray.remote(num_cpus=0)
def work(seconds: float) -> int:
    time.sleep(seconds)
    return 1


@debuggable
@ray.remote(num_cpus=0)
def explode(marker: str) -> None:
    message = f"boom {marker}"
    raise ValueError(message)


class _Seen(io.StringIO):
    """What tail prints, each line with the moment it was printed."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        now = time.time()
        self.lines.extend((now, line) for line in text.splitlines() if line)
        return len(text)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="live-latency-"))
    with node_cluster([work_dir / "node1", work_dir / "node2"]):
        stop = threading.Event()

        def job() -> None:
            while not stop.is_set():
                ray.get([work.options(resources={f"node{k}": 0.01}).remote(0.05) for k in range(3)])

        views: list[tuple[float, dict[str, float]]] = []  # (when shown, marker -> its end)

        def watch() -> None:
            watching = live.Watch()
            try:
                while not stop.is_set():
                    view = watching.refresh()
                    ends = {f["error"]: _epoch(f["ended"]) for f in view.failures}
                    views.append((time.time(), ends))
                    time.sleep(args.interval)
            finally:
                watching.close()

        seen = _Seen()
        threads = [
            threading.Thread(target=job, daemon=True),
            threading.Thread(target=watch, daemon=True),
            threading.Thread(
                target=lambda: live.tail(function="explode", status="error", raw=True, out=seen,
                                         until=stop),
                daemon=True,
            ),
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        # Both started reading: a failure made until each has shown one.
        while not (seen.lines and any(ends for _, ends in views)):
            with contextlib.suppress(ValueError):
                ray.get(explode.options(resources={"node2": 0.01}).remote("canary"))
            time.sleep(0.5)
        markers = []
        for trial in range(args.trials):
            marker = f"m{trial}-{time.monotonic_ns()}"
            with contextlib.suppress(ValueError):
                ray.get(explode.options(resources={"node2": 0.01}).remote(marker))
            markers.append(marker)
            time.sleep(2.5)
        time.sleep(3)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        top_delays, tail_delays = [], []
        for marker in markers:
            error = f"ValueError: boom {marker}"
            shown = next((when, ends[error]) for when, ends in views if error in ends)
            top_delays.append(shown[0] - shown[1])
            printed = next((when, line) for when, line in seen.lines if marker in line)
            stamp = printed[1].split('"timestamp":"', 1)[1][:32]
            tail_delays.append(printed[0] - _epoch(stamp))
    for label, delays in (
        (f"top (refresh every {args.interval:g} s)", top_delays),
        ("tail (a look every 0.5 s)", tail_delays),
    ):
        middle, most = statistics.median(delays), max(delays)
        print(f"{label}: from a failure's call.end on node 2 to shown: median "
              f"{middle:.2f} s, max {most:.2f} s ({len(delays)} trials)")  # fmt: skip


if __name__ == "__main__":
    main()
