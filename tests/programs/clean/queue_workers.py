"""Producer and consumers: two workers take jobs from a ray.util.queue.Queue until told to stop.

The driver puts the jobs, one ``None`` per worker to end them, and gathers what each did.
"""

from __future__ import annotations

import ray
from _checkpoint import checkpoint
from ray.util.queue import Queue

WORKERS = 2
JOBS = 20


@ray.remote
def work(jobs: Queue) -> list[int]:
    """Take jobs until ``None``; each job's checksum."""
    done = []
    while (job := jobs.get()) is not None:
        total = 0
        for value in range(job * 1_000, job * 1_000 + 120_000):
            total = (total + value * value) % 1_000_003
        done.append(total)
    return done


def main() -> None:
    ray.init(num_cpus=2)
    jobs = Queue(maxsize=2 * WORKERS)  # its actor holds no CPU once placed
    workers = [work.remote(jobs) for _ in range(WORKERS)]
    for job in range(JOBS):
        jobs.put(job)  # blocks while the queue is full: the workers set the pace
        if job == JOBS // 2:
            checkpoint()  # the workers are running: taking jobs, or waiting for the next
    for _ in workers:
        jobs.put(None)
    done = ray.get(workers)
    print(f"{sum(len(d) for d in done)} jobs done by {len(done)} workers")
    ray.shutdown()


if __name__ == "__main__":
    main()
