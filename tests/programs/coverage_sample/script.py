"""A script measured with raytrace_kit.coverage() (run by test_coverage.py).

With an address as its argument, it connects to that cluster (started outside) instead.
"""

from __future__ import annotations

import sys

import ray
from sample import work

import raytrace_kit

if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        with raytrace_kit.coverage(data_file="script.coverage") as data_file:
            ray.init(address=address or "local", num_cpus=None if address else 1)
            counter = ray.remote(work.Counter).remote(-1)  # held: Ray < 2.50 drops it
            print(ray.get(counter.add.remote(12)))
            ray.shutdown()
    except raytrace_kit.CoverageError as exc:
        print(f"CoverageError: {exc}")
        sys.exit(3)
    print(f"data in {data_file}")
