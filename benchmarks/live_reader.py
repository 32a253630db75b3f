"""What a node's live reader costs the node: CPU per second at a 1 s refresh, 10,000 events/s.

A writer process appends --rate events a second (calls' ``call.start`` and ``call.end``,
rendered by the kit's own encoder and writer, four processes' files) to a directory; a
reader refreshes once a second for --seconds, as ``raytrace-kit top`` makes each node's
reader do, and its CPU time (``time.process_time``) per second of wall time is its cost:

- ``reader``: the reading itself in this process (new bytes by inode, decoded, tallied,
  the node's state made), what ``NodeReader.look`` does but for asking live stacks;
- ``actor``: the real thing: a reader actor on a local Ray node, asked ``look()`` once a
  second through Ray, its own figure (``cpu_share``: CPU over wall time since its last
  look), Ray's handling of the call included;
- ``idle`` and ``idle actor``: both with nothing written (the floors).

The target (issue 23): at most 5 % of one core.

Run: python benchmarks/live_reader.py [--rate 10000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ray
from _harness import cache_bytecode

from raytrace_kit._driver.readers import Readers
from raytrace_kit._reports.live import Cursor, LiveTally

sys.path.insert(0, str(Path(__file__).parents[1]))  # the tests' writer of event files
from tests.helpers import EventFile


def write(directory: str, rate: int, seconds: float, ready: multiprocessing.Event) -> None:
    """Append ``rate`` events a second for ``seconds`` (in batches every 10 ms)."""
    pid = os.getpid()  # a live process: its calls count as running, as a real node's do
    files = [EventFile(Path(directory), pid, node=f"{n:02x}" * 28) for n in range(4)]
    ready.set()
    per_batch = max(2, rate // 100 // 2 * 2)  # start + end pairs
    began, sent, number = time.monotonic(), 0, 0
    while time.monotonic() - began < seconds:
        for _ in range(per_batch // 2):
            events = files[number % 4]
            call = f"{pid:010x}{number % 2**24:06x}"
            events.start(call, f"jobs.step{number % 8}")
            events.end(call, seconds=0.002 + (number % 17) / 1000)
            number += 1
        sent += per_batch
        ahead = sent / rate - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)


def reading(directory: Path, seconds: float) -> list[float]:
    """CPU share of each 1 s refresh of a reader in this process."""
    cursor, live = Cursor(directory), LiveTally()
    shares = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        cpu, wall = time.process_time(), time.monotonic()
        for name, lines in cursor.read():
            live.take(lines, name)
        live.reap()
        live.snapshot()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - wall)))
        shares.append((time.process_time() - cpu) / (time.monotonic() - wall))
    return shares


def through_ray(seconds: float) -> list[float]:
    """``cpu_share`` of a reader actor's looks, once a second (the first is its start)."""
    readers = Readers()
    shares = []
    try:
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            (state,) = readers.ask("look", [()])
            if state["cpu_share"] is not None:
                shares.append(state["cpu_share"])
            time.sleep(1.0)
    finally:
        readers.close()
    return shares


LABELS = ("idle", "reader", "idle actor", "actor")


def _line(label: str, shares: list[float]) -> str:
    return (
        f"  {label:<10} median {statistics.median(shares):6.2%} of a core, max {max(shares):6.2%}"
        f" ({len(shares)} refreshes)"
    )


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="events per second written")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    directories = {label: Path(tempfile.mkdtemp(prefix="live-reader-")) for label in LABELS}
    directories["idle actor"] = directories["actor"]  # the local node's reader reads there
    os.environ["RAYTRACE_LOG_DIR"] = str(directories["actor"])
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    results = {"idle": reading(directories["idle"], 5), "idle actor": through_ray(6)}
    for label in ("actor", "reader"):
        ready = multiprocessing.Event()
        writer = multiprocessing.Process(
            target=write, args=(str(directories[label]), args.rate, args.seconds + 3, ready)
        )
        writer.start()
        ready.wait()
        time.sleep(1.0)  # writing at its pace
        if label == "reader":
            results[label] = reading(directories[label], args.seconds)
        else:
            results[label] = through_ray(args.seconds)
        writer.join()
    written = sum(f.stat().st_size for f in directories["reader"].glob("*.jsonl"))
    ray.shutdown()
    print(f"\nlive reader at a 1 s refresh, {args.rate:,} events/s written "
          f"({written / 2**20:.0f} MiB a run)")  # fmt: skip
    for label in LABELS:
        print(_line(label, results[label]))
    print("  target: at most 5.00% of one core per node")


if __name__ == "__main__":
    main()
