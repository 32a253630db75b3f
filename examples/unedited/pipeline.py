"""A pipeline whose code knows nothing of raytrace_kit: run it with python, or with
``raytrace-kit run`` (see examples/whole_program.py)."""

from __future__ import annotations

import ray
from stages import Totals, clean, load

ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
parts = []
for part in range(6):  # one at a time: the ray.get-in-a-loop the report will name
    parts.append(ray.get(load.remote(part)))
cleaned = ray.get([clean.remote(rows) for rows in parts])  # waits on the straggler
totals = Totals.remote()
print("rows kept:", ray.get([totals.add.remote(rows) for rows in cleaned])[-1])
