"""A look from outside mid-run: say so, with the cluster's address, then wait for a go-ahead.

With ``CLEAN_CHECKPOINT`` set to a directory, :func:`checkpoint` writes ``ready`` there
(the cluster's GCS address inside) and waits until a file ``go`` appears: the test that
runs the program looks at the calls in flight meanwhile (``raytrace-kit stuck``). Unset,
it does nothing: the programs are the same programs either way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import ray

GO_AHEAD_TIMEOUT_S = 120.0  # a test that never says go: the program goes on, not hangs


def checkpoint() -> None:
    """Say where the cluster is, then wait for the go-ahead (if a test asked for one)."""
    where = os.environ.get("CLEAN_CHECKPOINT")
    if not where:
        return
    folder = Path(where)
    written = folder / "ready.part"
    written.write_text(ray.get_runtime_context().gcs_address)
    written.rename(folder / "ready")  # whole or not there: the test reads it once it is
    deadline = time.monotonic() + GO_AHEAD_TIMEOUT_S
    while not (folder / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
