"""What the stuck doctor costs while nothing is stuck: submission records and the watch.

Driver CPU per ``.remote()`` (this process's CPU time, the kit's thread included, from
the first submission until the batch is written), interleaved in rotating order:
  plain            @ray.remote (twice: the second copy is the noise floor)
  log=False        @debuggable(log=False): no records
  log=True         @debuggable: a call.submit record per .remote(), written in batches
for tasks and for actor method calls. The difference log=True - log=False is what one
submission record costs the submitting process.

Then the watch in the worker: wall time of N actor calls with the default stuck_after
(the kit's thread looks every 15 s) against stuck_after=0.1 (every 25 ms, the most it
ever looks) and stuck_after=False; equal within the noise floor means it costs nothing
measurable.

Run: python benchmarks/submissions.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import statistics
import time

import ray
from _harness import actor_calls, arguments, cache_bytecode, interleave_until_stable, print_ratios

from raytrace_kit import debuggable
from raytrace_kit._output import submissions


def trivial(x: int) -> int:
    return x


class Echo:
    def echo(self, x: int) -> int:
        return x


def submit_cpu(submit, n: int) -> float:
    """CPU seconds this process spends submitting ``n`` calls and writing their records."""
    start = time.process_time()
    refs = [submit(i) for i in range(n)]
    submissions.flush()  # the batch's write, on this thread: counted here
    spent = time.process_time() - start
    ray.get(refs)
    return spent


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=2000, rounds=7)
    n = args.calls
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    remote, actor_class = ray.remote(trivial), ray.remote(Echo)
    tasks = {
        "plain": remote,
        "plain (2)": ray.remote(trivial),
        "log=False": debuggable(log=False)(remote),
        "log=True": debuggable(remote),
    }
    actors = {
        "plain": actor_class.remote(),
        "plain (2)": actor_class.remote(),
        "log=False": debuggable(log=False)(actor_class).remote(),
        "log=True": debuggable(actor_class).remote(),
    }
    for label, variant in tasks.items():  # warm up: workers up, functions exported
        submit_cpu(variant.remote, 200)
        submit_cpu(actors[label].echo.remote, 200)
    samples = interleave_until_stable(
        {
            **{f"task {k}": (lambda v=v: submit_cpu(v.remote, n)) for k, v in tasks.items()},
            **{f"actor {k}": (lambda a=a: submit_cpu(a.echo.remote, n)) for k, a in actors.items()},
        },
        args.rounds,
        args.max_rounds,
        [("task plain", "task plain (2)"), ("actor plain", "actor plain (2)")],
    )
    by_task = {k: samples[f"task {k}"] for k in tasks}
    by_actor = {k: samples[f"actor {k}"] for k in actors}
    print_ratios("Driver CPU per task .remote()", by_task, n, "plain", "plain (2)", width=10)
    print_ratios("Driver CPU per actor call .remote()", by_actor, n, "plain", "plain (2)", width=10)
    for title, figures in (("task", by_task), ("actor call", by_actor)):
        record = statistics.median(figures["log=True"]) - statistics.median(figures["log=False"])
        print(f"  one submission record ({title}): {record / n * 1e6:.2f} us of driver CPU")

    watched = {
        "default": debuggable(actor_class).remote(),
        "default (2)": debuggable(actor_class).remote(),
        "stuck_after=0.1": debuggable(stuck_after=0.1)(actor_class).remote(),
        "stuck_after=False": debuggable(stuck_after=False)(actor_class).remote(),
    }
    for handle in watched.values():
        actor_calls(handle, 200)
    walls = interleave_until_stable(
        {k: (lambda h=h: actor_calls(h, n)) for k, h in watched.items()},
        args.rounds,
        args.max_rounds,
        [("default", "default (2)")],
    )
    print_ratios("Actor calls, log=True, by how often the watch looks", walls, n, "default",
                 "default (2)")  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
