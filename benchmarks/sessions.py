"""Reading a session and collecting nodes: time and peak memory, side by side.

Part 1, reading. A session of --calls calls (2 events each; 500,000 calls is 1,000,000
events, about 540 MB) is written once with the kit's own renderer, in 8 process files.
Each variant then runs in a fresh process (peak memory is per process), in rotating order,
--rounds times:
  read_events (v1)   the previous read_events(): json.loads of every line, dicts kept
  calls()            open_session(path).calls(): one Call per execution
  calls() (again)    the same, measured apart: the noise floor
  events()           open_session(path).events(): every event as a dict
  parse floor        msgspec decoding every line into a 3-field struct: what parsing costs

Part 2, collection. A 3-node ray.cluster_utils.Cluster whose worker nodes write to their
own directories; --collect-events events are written into each node's directory (as its
workers would), then collect() copies them all, --rounds times into fresh destinations.

Targets (issue 13): calls() over 1,000,000 events in at most 3 s and 1 GB peak; collection
of 3 nodes x 100,000 events in at most 5 s.

Run: python benchmarks/sessions.py [--calls 500000] [--rounds 3] [--collect-events 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import cache_bytecode

VARIANTS = {
    "read_events (v1)": """
import json
from pathlib import Path
events = []
for f in sorted(Path(PATH).rglob("events-*.jsonl")):
    for line in f.read_bytes().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            events.append(e)
events.sort(key=lambda e: str(e.get("timestamp", "")))
n = len(events)
""",
    "calls()": "n = len(raytrace_kit.open_session(PATH).calls())",
    "calls() (again)": "n = len(raytrace_kit.open_session(PATH).calls())",
    "events()": "n = len(raytrace_kit.open_session(PATH).events())",
    "parse floor": """
import msgspec
from pathlib import Path
class E(msgspec.Struct):
    event: str = ""
    call_id: str = ""
    timestamp: str = ""
decode = msgspec.json.Decoder(E).decode
n = 0
for f in sorted(Path(PATH).rglob("events-*.jsonl")):
    for line in f.read_bytes().splitlines():
        decode(line)
        n += 1
""",
}

# Imports happen before the clock starts (raytrace_kit imports Ray: about a second).
_TIMED = """
import resource, sys, time
import msgspec, raytrace_kit
PATH = sys.argv[1]
start = time.perf_counter()
{body}
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(seconds, peak, n)
"""


def write_session(directory: Path, calls: int, files: int = 8, pid0: int = 1000) -> None:
    """``calls`` calls in ``files`` process files, rendered by the kit's own schema."""
    from raytrace_kit._output import encode  # noqa: PLC0415 -- only when writing
    from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415

    fragments = [
        encode.members({"function": f"pipeline.stage{i}", "kind": "task"}) for i in range(20)
    ]
    handles = [(directory / f"events-{'ab' * 6}-{pid0 + i}.jsonl").open("w") for i in range(files)]
    identities = [
        ProcessIdentity("01000000", "ab" * 28, f"{i:02d}" * 28, pid0 + i, is_worker=True)
        for i in range(files)
    ]
    for n in range(calls):
        f = n % files
        members = encode.call_members(
            call_id=f"{pid0:06x}{n:010x}",
            spec_fragment=fragments[n % 20],
            mode="ray",
            task_id=f"{n:016x}" + "ff" * 12 + "01000000",
            actor_id=None,
            identity=identities[f],
            attempt=0,
            task_name=f"stage{n % 20}",
        )
        error = ValueError("bad input") if n % 50 == 0 else None
        handles[f].write(
            encode.call_line("call.start", "info", members, encode.memory_members()).decode()
        )
        tail = encode.end_members(0.0123, error, 0.01)
        handles[f].write(
            encode.call_line("call.end", "error" if error else "info", members, tail).decode()
        )
    for handle in handles:
        handle.close()


def read_part(calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        write_session(path, calls)
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"session: {2 * calls:,} events, {size / 1e6:.0f} MB")
        samples: dict[str, list[tuple[float, int]]] = {label: [] for label in VARIANTS}
        labels = list(VARIANTS)
        for round_no in range(rounds):
            shift = round_no % len(labels)
            for label in labels[shift:] + labels[:shift]:
                code = _TIMED.format(body=VARIANTS[label])
                out = subprocess.run(
                    [sys.executable, "-c", code, str(path)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()
                samples[label].append((float(out[0]), int(out[1])))
    base = statistics.median(s for s, _ in samples["read_events (v1)"])
    floor = statistics.median(s for s, _ in samples["calls() (again)"]) / statistics.median(
        s for s, _ in samples["calls()"]
    )
    print(f"\nReading, median of {rounds} rounds, each in a fresh process")
    print(f"  noise floor (calls() vs calls() again): {floor:.3f}")
    print(f"  {'variant':<18} {'seconds':>8} {'peak MB':>8} {'vs v1':>7}")
    for label, values in samples.items():
        seconds = statistics.median(s for s, _ in values)
        peak = statistics.median(p for _, p in values) / 1e6
        print(f"  {label:<18} {seconds:8.2f} {peak:8.0f} {base / seconds:6.1f}x")


def collect_part(events: int, rounds: int) -> None:
    import ray  # noqa: PLC0415 -- part 2 only
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    import raytrace_kit  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dirs = [root / f"node{i}" for i in (1, 2)]
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
        for directory in dirs:
            directory.mkdir()
            cluster.add_node(num_cpus=1, env_vars={"RAYTRACE_LOG_DIR": str(directory)})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            head_dir = raytrace_kit.log_dir()
            for i, directory in enumerate([head_dir, *dirs]):
                write_session(directory, events // 2, files=2, pid0=5000 + 10 * i)
            times = []
            for round_no in range(rounds):
                started = time.perf_counter()
                dest = raytrace_kit.collect(root / f"dest{round_no}", profiles=False)
                times.append(time.perf_counter() - started)
            calls = raytrace_kit.open_session(dest).calls()
            print(f"\nCollection of 3 nodes x {events:,} events ({len(calls):,} calls read back)")
            print(f"  seconds per collect(), fresh destination: {[round(t, 2) for t in times]}")
            print(f"  median: {statistics.median(times):.2f} s")
            started = time.perf_counter()
            raytrace_kit.collect(root / "dest0", profiles=False)
            again = time.perf_counter() - started
            print(f"  again into a collected destination (nothing new): {again:.2f} s")
        finally:
            ray.shutdown()
            cluster.shutdown()


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--collect-events", type=int, default=100_000)
    args = parser.parse_args()
    os.environ.pop("RAYTRACE_LOG_DIR", None)
    read_part(args.calls, args.rounds)
    collect_part(args.collect_events, args.rounds)


if __name__ == "__main__":
    main()
