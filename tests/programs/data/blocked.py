"""A UDF blocked until the test says go: ``stuck`` and ``top`` look at it meanwhile.

The driver writes the cluster's address; the UDF says it is running (``ready``), then waits
on a lock that only the go-ahead releases: the batch is in flight, blocked, while looked at.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import ray

FOLDER = Path(os.environ["DATA_CHECKPOINT"])


def _release_on_go(held: threading.Lock) -> None:
    """Another thread: lets the UDF go once the test says so."""
    while not (FOLDER / "go").exists():
        time.sleep(0.02)
    held.release()


def lookup(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if batch["id"][0] == 0:
        held = threading.Lock()
        held.acquire()
        threading.Thread(target=_release_on_go, args=(held,), daemon=True).start()
        (FOLDER / "ready").touch()
        held.acquire()  # the waiting line: blocked until the go-ahead
    return batch


def main() -> None:
    ray.init(num_cpus=2)
    written = FOLDER / "address.part"
    written.write_text(ray.get_runtime_context().gcs_address)
    written.rename(FOLDER / "address")  # whole or not there
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(40, override_num_blocks=4).map_batches(lookup)
    print(sum(len(b["id"]) for b in ds.iter_batches(batch_size=None)))
    ray.shutdown()


if __name__ == "__main__":
    main()
