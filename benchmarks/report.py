"""``raytrace-kit report`` on sessions of a million events: time and peak memory.

Each session is written once through the kit's own writer (``EventWriter``, rotating at
32 MiB, as a long run's files do) and renderer: --calls calls (2 events each; 500,000
calls is 1,000,000 events, 600 to 650 MB; the real shape writes a call.submit too, so it
makes two thirds as many calls, for as many events), in one of two shapes (--shape, both
by default):
  pipeline   8 worker processes on one node, with what a report has to find: failures
             (2%), retried calls (1%), an actor's calls, a parent's children, a process
             whose memory grows call after call, and calls cut off by a dying process
  real       shaped like a real pipeline's run (``real_session.py``): 16 worker processes
             on 2 nodes, 50 functions, about 12,000 parents that each submit a few task
             children in other processes and end after them (half one at a time), 2%
             failures with 1.5 KB tracebacks, a few hundred retries, a handful of calls
             that never end, calls scheduled on a simulated clock, and each call's
             call.submit record (the driver's file, or the parent's), as the kit writes them

Each variant runs as a fresh process, start-up included (as a user types it), in rotating
order, --rounds times; its CPU time (user + system) and peak memory are the process's own
(``wait4``):
  report            raytrace-kit report SESSION (two processes from PARALLEL_MIN_BYTES up)
  report (again)    the same, measured apart: the noise floor
  one process       the same report read in one pass in one process (processes=1)
  report --json     raytrace-kit report SESSION --json
  calls() for ref.  python -c "open_session(SESSION).calls()": what keeping every call costs

Peak memory is given twice: the largest process's (``wait4``), and the process tree's
(its processes' RSS summed, sampled every 10 ms: a report's two readers count twice).

Targets (issues 14, 26 and 42): the report in at most 3 s and 256 MB peak, for each shape.

  report, before    with --before REF: the report by the kit of a git ref (or a src/),
                    the same hour, on the same files

Run: python benchmarks/report.py [--calls 500000] [--rounds 3] [--shape pipeline|real|both]
     [--before REF]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
from _harness import cache_bytecode, source_of
from real_session import write_real_session  # the real-shaped session

PROCESSES = 8
MIB = 2**20


_BEFORE = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import raytrace_kit; "
    "assert raytrace_kit.__file__.startswith(sys.path[0]), raytrace_kit.__file__; "
    "from raytrace_kit.cli import main; raise SystemExit(main())"
)


def variants(session: Path, before: Path | None = None) -> dict[str, list[str]]:
    beside = Path(sys.executable).with_name("raytrace-kit")  # the venv's, even if not on PATH
    command = str(beside) if beside.exists() else shutil.which("raytrace-kit") or "raytrace-kit"
    calls = "import raytrace_kit, sys; print(len(raytrace_kit.open_session(sys.argv[1]).calls()))"
    one = (
        "import sys; from raytrace_kit._reports.cluster import report_in_parallel; "
        "print(report_in_parallel(sys.argv[1], processes=1))"
    )
    made = {
        "report": [command, "report", str(session)],
        "report (again)": [command, "report", str(session)],
        "one process": [sys.executable, "-c", one, str(session)],
        "report --json": [command, "report", str(session), "--json"],
        "calls() for ref.": [sys.executable, "-c", calls, str(session)],
    }
    if before is not None:  # the same report by the kit of --before (its own src first)
        made["report, before"] = [
            sys.executable,
            "-c",
            _BEFORE,
            str(before),
            "report",
            str(session),
        ]
    return made


def rotate_as_long_runs_do() -> None:
    """Rotate event files at 32 MiB (set before the kit's writer reads the limits)."""
    os.environ["RAYTRACE_ROTATION_MAX_BYTES"] = str(32 * MIB)
    os.environ["RAYTRACE_ROTATION_BACKUP_COUNT"] = "100"


def write_session(directory: Path, calls: int) -> None:
    """``calls`` calls in :data:`PROCESSES` worker files, through the kit's writer."""
    rotate_as_long_runs_do()
    from raytrace_kit._output import encode  # noqa: PLC0415 -- after the rotation settings
    from raytrace_kit._output.writer import EventWriter  # noqa: PLC0415
    from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415

    node = "ab" * 28
    identities = [
        ProcessIdentity("01000000", node, f"{i:02d}" * 28, 2000 + i, is_worker=True)
        for i in range(PROCESSES)
    ]
    writers = [
        EventWriter(directory / f"events-{node[:12]}-{2000 + i}.jsonl") for i in range(PROCESSES)
    ]
    fragments = {
        name: encode.members({"function": name, "kind": kind})
        for name, kind in [
            *((f"pipeline.stage{i}", "task") for i in range(20)),
            ("pipeline.Store.put", "actor_method"),
            ("pipeline.fetch", "task"),
        ]
    }
    rss = [200 * MIB] * PROCESSES
    for n in range(calls):
        p = n % PROCESSES
        if p == 7 and n % 40 == 7:
            name, actor, parent = "pipeline.Store.put", "cd" * 16, None
        elif p == 6 and n % 64 == 6:
            name, actor, parent = "pipeline.fetch", None, f"{2006:06x}{14:010x}/" + "ee" * 24
        else:
            name, actor, parent = f"pipeline.stage{n % 20}", None, None
        rss_start = rss[p]
        if p == 5 and n < calls // 4:
            rss[p] += 256 * 1024
        members = encode.call_members(
            call_id=f"{2000 + p:06x}{n:010x}",
            spec_fragment=fragments[name],
            mode="ray",
            task_id=f"{n:016x}" + "ff" * 12 + "01000000",
            actor_id=actor,
            identity=identities[p],
            attempt=1 if n % 97 == 0 else 0,
            task_name=name.rsplit(".", 1)[-1],
            parent=parent,
        )
        start = encode.memory_members((rss_start, rss_start // 2, rss_start))
        writers[p].write(encode.call_line("call.start", "info", members, start))
        if n % 100_003 == 0:
            continue  # the process died during this call: no call.end
        error = ValueError(f"bad input {n}") if n % 50 == 0 else None
        figures = (rss[p], rss[p] // 2, rss[p])
        tail = encode.end_members(0.0123, error, 0.01, rss_start=rss_start, figures=figures)
        writers[p].write(encode.call_line("call.end", "error" if error else "info", members, tail))
    for writer in writers:
        writer.close()


class Run(NamedTuple):
    """One fresh process's run: wall seconds, peak RSS bytes, CPU seconds (user + system).

    CPU time is what a machine busy with other work inflates least: on a shared 2-core
    machine, compare it too. ``tree`` is the peak of the RSS of the process and its
    children summed (pages they share counted in each).
    """

    seconds: float
    peak: int
    cpu: float
    tree: int


def _tree_rss(pid: int) -> int:
    """The RSS of ``pid`` and its children, summed (bytes; 0 once it is gone)."""
    total = 0
    for process in (pid, *_children(pid)):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{process}/statm").read_text().split()
            total += int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found.extend(int(c) for c in (task / "children").read_text().split())
    return found


def run(command: list[str]) -> Run:
    """One fresh process running ``command``, measured."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], _tree_rss(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status) != 0:
        msg = f"{command} failed with {status}"
        raise RuntimeError(msg)
    return Run(seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, peak[0])


def write_and_say(directory: Path, calls: int, shape: str = "pipeline") -> None:
    """Write a session of ``shape`` into ``directory``; say how big it is, how long it took."""
    started = time.perf_counter()
    if shape == "real":  # three events a call (call.submit too): as many events as pipeline's
        rotate_as_long_runs_do()
        calls = calls * 2 // 3
        events = write_real_session(directory, calls)
    else:
        write_session(directory, calls)
        events = 2 * calls
    files = sorted(directory.glob("events-*.jsonl*"))
    size = sum(f.stat().st_size for f in files)
    print(
        f"{shape} session: {calls:,} calls ({events:,} events), {size / MIB:.0f} MiB in "
        f"{len(files)} files, written in {time.perf_counter() - started:.1f} s",
        flush=True,
    )


def compare(commands: dict[str, list[str]], rounds: int, base: str) -> dict[str, list[Run]]:
    """Run each variant ``rounds`` times in rotating order; print medians, peaks, ratios.

    Returns each variant's runs, one per round.
    """
    names = list(commands)
    results: dict[str, list[Run]] = {name: [] for name in names}
    run(commands[base])  # warm the page cache: every variant reads the same bytes
    for round_number in range(rounds):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(run(commands[name]))
    ratio = f"vs {base}"
    print(
        f"\n{'variant':<18}{'median s':>10}{'min s':>9}{'CPU s':>8}{'peak MiB':>10}"
        f"{'tree MiB':>10}{ratio:>14}"
    )
    base_median = statistics.median(r.seconds for r in results[base])
    for name in names:
        seconds = [r.seconds for r in results[name]]
        cpu = statistics.median(r.cpu for r in results[name])
        peak = max(r.peak for r in results[name])
        tree = max(r.tree for r in results[name])
        median = statistics.median(seconds)
        print(
            f"{name:<18}{median:>10.2f}{min(seconds):>9.2f}{cpu:>8.2f}{peak / MIB:>10.0f}"
            f"{tree / MIB:>10.0f}{median / base_median:>13.2f}x"
        )
    return results


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shape", choices=["pipeline", "real", "both"], default="both")
    parser.add_argument("--before", help="a git ref (or a src directory): its report beside")
    args = parser.parse_args()
    shapes = ["pipeline", "real"] if args.shape == "both" else [args.shape]
    for shape in shapes:
        with tempfile.TemporaryDirectory() as tmp:  # one session on disk at a time
            session = Path(tmp) / "session"
            session.mkdir()
            before = source_of(args.before, Path(tmp)) if args.before else None
            print(f"\n--- {shape} ---", flush=True)
            write_and_say(session, args.calls, shape)
            results = compare(variants(session, before), args.rounds, "report")
            base = statistics.median(r.seconds for r in results["report"])
            floor = statistics.median(r.seconds for r in results["report (again)"]) / base
            print(f"\nnoise floor (report again / report): {floor:.3f}")
    print("targets: report <= 3 s and <= 256 MiB peak (start-up included), each shape")


if __name__ == "__main__":
    main()
