"""Results of 10 MiB kept as refs in a list until the object store spills (or, fixed, consumed).

``python store_refs.py buggy|fixed [READY GATE]``: with READY and GATE, the buggy run writes
READY (its cluster's address) once it holds every ref, then holds them until GATE exists.
Its own local cluster, an object store of 100 MiB.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import ray

CALLS = 16  # under 20: no tasks-too-small finding beside the one this is about
SIZE = 10 * 2**20


@ray.remote
def produce(i: int) -> np.ndarray:
    return np.full(SIZE, i % 251, dtype=np.uint8)


def tell(ready: Path) -> None:
    """Write this cluster's address and log directory to ``ready``."""
    context = ray.get_runtime_context()
    logs = Path(context.get_temp_dir(), context.get_session_name(), "logs")
    partial = ready.with_suffix(".part")  # renamed when whole: a reader never sees it half written
    partial.write_text(json.dumps({"address": context.gcs_address, "logs": str(logs)}))
    partial.replace(ready)


def buggy(ready: Path | None, gate: Path | None) -> int:
    refs = []
    for i in range(CALLS):
        refs.append(produce.remote(i))  # HOLDS THE STORE
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    if ready is not None and gate is not None:
        tell(ready)
        deadline = time.monotonic() + 300  # a test that never opens the gate: fail, not hang
        while not gate.exists():  # a barrier on a file the test writes, not a delay
            if time.monotonic() > deadline:
                return -1
            time.sleep(0.05)
    return sum(int(ray.get(ref)[0]) for ref in refs)


def fixed() -> int:
    pending, total = [], 0
    for i in range(CALLS):
        pending.append(produce.remote(i))
        if len(pending) >= 4:  # a bounded number in flight, each result taken as it ends
            ready, pending = ray.wait(pending, num_returns=1)
            total += int(ray.get(ready[0])[0])
            del ready
    for ref in pending:
        total += int(ray.get(ref)[0])
    return total


if __name__ == "__main__":
    ray.init(address="local", num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False)
    paths = [Path(p) for p in sys.argv[2:4]] or [None, None]
    got = buggy(*paths) if sys.argv[1] == "buggy" else fixed()
    if sys.argv[1] == "fixed" and paths[0] is not None:
        tell(paths[0])
    print("total", got)
    sys.exit(0 if got == sum(i % 251 for i in range(CALLS)) else 1)
