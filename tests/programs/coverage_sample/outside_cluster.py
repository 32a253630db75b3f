"""A cluster started outside the measured run: prints its address, ends when stdin closes."""

from __future__ import annotations

import sys

from ray.cluster_utils import Cluster

if __name__ == "__main__":
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    print(cluster.address, flush=True)
    sys.stdin.read()
    cluster.shutdown()
