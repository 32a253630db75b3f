"""What the boundary costs per call in a Ray worker, in all and part by part.

Runs inside one Ray actor, so every part runs where it runs for real (a Ray worker with its
threads, its event file, Ray's task context). Each variant is timed in CPU time of the
thread (``time.thread_time``), not wall time, so another process on the machine changes
the figures little; rounds are interleaved in rotating order and the median of --rounds is
printed, with a noise floor (the same variant measured twice).

  whole call, log=True        an instrumented method called in the actor: start and end
  whole call, log=False       the same without events: context and bookkeeping only
  plain method                the method itself (the floor of the two above)
  figures, a short call       what a call after one under 1 ms reads: statm at its end,
                              nothing at its start (the end's figures, within 1 ms)
  figures, one end            memory and thread clock (2 syscalls): each end of a longer call
  Ray ids                     task id, attempt and name from Ray's worker, once
  render a call line          one call.start line, rendered to bytes (a call renders two)
  write a line                one append to the event file (a call writes two)
  timestamp                   the ISO 8601 time of one line
Then the same boundary in calls Ray delivers (a debuggable actor called N times from the
driver, as overhead.py calls it): the kit's thread CPU per call, timed in the worker around
the boundary less the method. Ray's own work between calls leaves the caches cold, so this
is what a call costs for real (2.5 to 3 times the figure of the tight loop, 2026-11-28).

Run: python benchmarks/boundary_parts.py [--calls 20000] [--rounds 9]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import ray
from _harness import arguments, cache_bytecode


class Echo:
    def echo(self, x: int) -> int:
        return x


@ray.remote
class Bench:
    """Times each variant in this worker: thread CPU per call, one list per variant."""

    def run(self, calls: int, rounds: int) -> dict[str, list[float]]:
        from raytrace_kit import _process  # noqa: PLC0415 -- in the worker
        from raytrace_kit._options import DebugOptions  # noqa: PLC0415
        from raytrace_kit._output import encode, writer  # noqa: PLC0415
        from raytrace_kit._output.context import ActiveCall  # noqa: PLC0415
        from raytrace_kit._worker.instrument import instrument_class  # noqa: PLC0415

        logged = instrument_class(Echo, DebugOptions(log=True))()
        quiet = instrument_class(Echo, DebugOptions(log=False))()
        plain = Echo()
        logged.echo(0)  # the event file is open from here on
        call = ActiveCall({"function": "bench.echo", "kind": "actor_method"}, "", "ray", None)
        call.capture()
        line = encode.call_line("call.start", "info", call.fragment)
        write = writer.output_state.state.worker_writer.write  # type: ignore[union-attr]
        variants: dict[str, Callable[[int], Any]] = {
            "whole call, log=True": logged.echo,
            "whole call, log=True (2)": logged.echo,
            "whole call, log=False": quiet.echo,
            "plain method": plain.echo,
            # What a call of a function whose last call ran under 1 ms reads at its end and
            # its start (statm once: no clock); after a longer one, a start or end reads
            # both (the process's clock too after one of 10 ms or more).
            "figures, a short call": lambda _: (
                _process.end_figures(process_cpu=False, usage=False),
                _process.start_figures(time.perf_counter(), process_cpu=False, thread_cpu=False),
            ),
            "figures, one end (2 syscalls)": lambda _: _process.call_figures(process_cpu=False),
            "Ray ids": lambda _: _process.running_task(),
            "render a call line": lambda _: encode.call_line("call.start", "info", call.fragment),
            "write a line": lambda _: write(line),
            "timestamp": lambda _: encode.now(),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for number in range(rounds):
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                fn = variants[name]
                started = time.thread_time()
                for i in range(calls):
                    fn(i)
                samples[name].append((time.thread_time() - started) / calls * 1e6)
        return samples


class Probe:
    """A debuggable actor that times, in its worker, the kit's part of each call it gets."""

    def __init__(self) -> None:
        method = type(self).echo  # the kit's wrapper; the one that calls the boundary's run
        while "run" not in method.__globals__ and hasattr(method, "__wrapped__"):
            method = method.__wrapped__
        names, clock = method.__globals__, time.thread_time
        boundary, self.kit = names["run"], []

        def run(spec: Any, fn: Any, args: Any, kwargs: Any, *more: Any, **options: Any) -> Any:
            inside = [0.0]

            def user(*a: Any, **k: Any) -> Any:
                began = clock()
                try:
                    return fn(*a, **k)
                finally:
                    inside[0] = clock() - began

            began = clock()
            try:
                return boundary(spec, user, args, kwargs, *more, **options)
            finally:
                self.kit.append((clock() - began - inside[0]) * 1e6)

        names["run"] = run

    def echo(self, x: int) -> int:
        return x

    def take(self) -> float:
        """The median of the calls since the last take, in µs."""
        kit, self.kit = self.kit, []
        return statistics.median(kit)


def delivered(calls: int, rounds: int) -> list[float]:
    """The kit's thread CPU per call (µs) in calls Ray delivers, a median per round."""
    from raytrace_kit import debuggable  # noqa: PLC0415

    probe = debuggable(ray.remote(Probe)).remote()
    ray.get([probe.echo.remote(i) for i in range(calls)])  # warm up
    ray.get(probe.take.remote())
    medians = []
    for _ in range(rounds):
        ray.get([probe.echo.remote(i) for i in range(calls)])
        medians.append(ray.get(probe.take.remote()))
    return medians


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    args = arguments(__doc__, calls=20000, rounds=9)
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    bench = Bench.remote()  # held: Ray before 2.50 loses a handle nothing holds
    samples = ray.get(bench.run.remote(args.calls, args.rounds))
    ray.kill(bench)
    real = delivered(min(args.calls, 4000), args.rounds)
    ray.shutdown()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\nThread CPU per call in a Ray worker (median of {args.rounds} interleaved rounds)")
    for name, value in medians.items():
        print(f"  {name:<28}{value:8.2f} us")
    floor = medians["whole call, log=True (2)"] / medians["whole call, log=True"]
    print(f"  noise floor (log=True twice): {floor:.3f}")
    kit = medians["whole call, log=True"] - medians["plain method"]
    parts = {
        "figures": medians["figures, a short call"],
        "Ray ids": medians["Ray ids"],
        "render x2": 2 * medians["render a call line"],
        "write x2": 2 * medians["write a line"],
    }
    print(f"\nThe kit's share of a logged call: {kit:.2f} us, of which")
    for name, value in parts.items():
        print(f"  {name:<12}{value:7.2f} us  ({value / kit:5.1%})")
    rest = kit - sum(parts.values())
    print(f"  {'the rest':<12}{rest:7.2f} us  ({rest / kit:5.1%}): context, ids, bookkeeping")
    print(
        f"\nThe kit's share in calls Ray delivers: {statistics.median(real):.2f} us "
        f"(round medians {min(real):.2f} to {max(real):.2f}), {statistics.median(real) / kit:.1f}x "
        "the tight loop's"
    )


if __name__ == "__main__":
    main()
