"""The sampling profiler on real Ray: programs under ``raytrace-kit run --sample``.

Each program attaches to the shared Ray instance with its own log dir (a job-level
``runtime_env``, so its workers are its own), and its CPU loops run until a condition
(CPU time spent, samples flushed), never for a fixed number of seconds.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import ray

from raytrace_kit._reports.samples import read_samples
from tests import helpers
from tests.unit.test_sampling_formats import decode_pprof

_HEAD = """\
import os, sys, time
import ray

ray.init(
    address=os.environ["RAY_ADDRESS"], log_to_driver=False,
    runtime_env={"env_vars": {"RAYTRACE_LOG_DIR": os.environ["SAMPLES_DIR"]}},
)
"""

_HOT = _HEAD + textwrap.dedent(
    """\
    @ray.remote
    def sampling_crunch():
        started = time.thread_time()
        total = 0
        while time.thread_time() - started < 1.0:  # CPU time, not wall-clock
            total += sum(i * i % 7 for i in range(200_000))  # the hot line
        return total

    print(len(ray.get([sampling_crunch.remote() for _ in range(2)])))
    """
)

_BLOCKED = _HEAD + textwrap.dedent(
    """\
    @ray.remote
    def sampling_blocker():
        started = time.thread_time()
        while time.thread_time() - started < 1.0:  # the waiter waits this CPU time at least
            sum(range(10_000))
        return 1

    @ray.remote
    def sampling_waiter():
        return ray.get(sampling_blocker.remote())  # the waiting line

    print(ray.get(sampling_waiter.remote()))
    """
)

_KILLED = _HEAD + textwrap.dedent(
    """\
    from raytrace_kit._reports.samples import read_samples

    @ray.remote(max_retries=0)
    def sampling_spin(flag):
        mine = os.path.join(os.environ["RAYTRACE_LOG_DIR"], "samples-")
        started = time.thread_time()
        flushed = 0
        while True:
            sum(i * i % 7 for i in range(20_000))  # the hot line
            if not flushed and time.thread_time() - started >= 0.5:
                files = [p for p in __import__("glob").glob(mine + "*")
                         if p.endswith(f"-{os.getpid()}.jsonl")]
                rows = [r for r in read_samples(map(__import__("pathlib").Path, files))
                        if r.function and r.function.endswith("sampling_spin")]
                flushed = sum(r.count for r in rows)
                if flushed:  # its samples are on disk: tell the test, and go on spinning
                    with open(flag + ".tmp", "w") as out:
                        out.write(f"{os.getpid()} {flushed}")
                    os.rename(flag + ".tmp", flag)

    try:
        ray.get(sampling_spin.remote(sys.argv[1]))
    except ray.exceptions.RayError as exc:
        print(type(exc).__name__)
    """
)


_ASYNC = _HEAD + textwrap.dedent(
    """\
    import asyncio

    @ray.remote
    class SamplingLooper:
        async def spin(self):
            started = time.thread_time()
            while time.thread_time() - started < 0.5:  # holds the loop: a blocking loop
                sum(i * i % 7 for i in range(200_000))  # the hot line
            return 1

        async def nap(self):
            await asyncio.sleep(0)
            return 2

    looper = SamplingLooper.remote()
    print(ray.get([looper.spin.remote(), looper.nap.remote()]))
    """
)


def _line_of(source: str, marker: str) -> int:
    return next(n for n, text in enumerate(source.splitlines(), 1) if marker in text)


def _environment(directory: Path) -> dict[str, str]:
    helpers.start_shared_ray()
    return {
        **os.environ,
        "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "SAMPLES_DIR": str(directory),
        "RAYTRACE_STUCK_AFTER": "off",
    }


def _run(tmp_path: Path, source: str, *options: str) -> Path:
    """Run ``source`` under ``raytrace-kit run --sample`` with its own log dir; that dir."""
    script, logs = tmp_path / "program.py", tmp_path / "logs"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "run", *options, str(script)],
        env=_environment(logs), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return logs


def _profile(logs: Path, fmt: str, *options: str) -> Path:
    out = logs.parent / f"profile.{fmt}"
    done = helpers.run_cli("profile", str(logs), "--format", fmt, "-o", str(out), *options)
    assert done.returncode == 0, done.stderr
    return out


def _leaf_lines_speedscope(path: Path) -> dict[tuple[str, int], float]:
    made = json.loads(path.read_text())
    assert made["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = made["shared"]["frames"]
    lines: dict[tuple[str, int], float] = {}
    for profile in made["profiles"]:
        assert profile["type"] == "sampled"
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            leaf = frames[stack[-1]]
            key = (Path(leaf["file"]).name, leaf["line"])
            lines[key] = lines.get(key, 0.0) + weight
    return lines


def _leaf_lines_collapsed(path: Path) -> dict[tuple[str, int], float]:
    lines: dict[tuple[str, int], float] = {}
    for text in path.read_text().splitlines():
        stack, count = text.rsplit(" ", 1)
        place = stack.split(";")[-1].rsplit("(", 1)[1].rstrip(")")
        file, line = place.rsplit(":", 1)
        key = (Path(file).name, int(line))
        lines[key] = lines.get(key, 0.0) + int(count)
    return lines


def _leaf_lines_pprof(path: Path) -> dict[tuple[str, int], float]:
    profile = decode_pprof(gzip.decompress(path.read_bytes()))
    lines: dict[tuple[str, int], float] = {}
    for sample in profile["samples"]:
        file, line = profile["lines"][sample["locations"][0]]  # the leaf first
        key = (Path(file).name, line)
        lines[key] = lines.get(key, 0.0) + sample["values"][0]
    return lines


_LEAF_LINES = {
    "speedscope": _leaf_lines_speedscope,
    "collapsed": _leaf_lines_collapsed,
    "pprof": _leaf_lines_pprof,
}


@pytest.mark.usefixtures("ray_session")
class TestSampling:
    """Where the samples land, whether a thread waits, and what a kill -9 leaves."""

    def test_hot_line_holds_most_running_samples_in_every_format(self, tmp_path: Path) -> None:
        """At least 80% of the calls' running samples on the known hot line, in each format."""
        logs = _run(tmp_path, _HOT, "--sample=200")
        hot = ("program.py", _line_of(_HOT, "# the hot line"))
        for fmt, leaf_lines in _LEAF_LINES.items():
            lines = leaf_lines(_profile(logs, fmt, "--function", "sampling_crunch"))
            total = sum(lines.values())
            assert total > 0, fmt
            assert lines.get(hot, 0) / total >= 0.8, (fmt, lines)
        report = json.loads(helpers.run_cli("report", str(logs), "--json").stdout)
        (row,) = report["slowest"]
        assert row["hot_line"].endswith(
            f"of sampling_crunch's running samples at program.py:{hot[1]}"
        )

    def test_a_call_blocked_in_ray_get_is_waiting(self, tmp_path: Path) -> None:
        """The waiter's samples are waiting ones; the profile of running samples leaves it out."""
        logs = _run(tmp_path, _BLOCKED, "--sample")
        rows = [r for r in read_samples(logs.glob("samples-*.jsonl"))
                if r.function is not None and r.function.endswith("sampling_waiter")]  # fmt: skip
        line = _line_of(_BLOCKED, "# the waiting line")
        in_get = [r for r in rows if any(f.line == line and f.name == "sampling_waiter"
                                         for f in r.stack)]  # fmt: skip
        blocked = [r for r in in_get if r.stack[-1].name.endswith("get_objects")]
        assert sum(r.count for r in blocked) >= 50  # a CPU second of its blocker's, at 100 Hz
        assert all(r.waiting for r in blocked)  # blocked in ray.get: waiting, every sample
        out = tmp_path / "running.collapsed"
        helpers.run_cli("profile", str(logs), "--function", "sampling_waiter", "--format",
                        "collapsed", "-o", str(out))  # fmt: skip
        leaves = [t.rsplit(" ", 1)[0].split(";")[-1] for t in
                  (out.read_text().splitlines() if out.exists() else [])]  # fmt: skip
        assert not [leaf for leaf in leaves if leaf.split(" (")[0].endswith("get_objects")]
        idle = _profile(logs, "collapsed", "--function", "sampling_waiter", "--idle")
        assert "get_objects (" in idle.read_text()

    def test_samples_survive_kill_9_up_to_the_last_flush(self, tmp_path: Path) -> None:
        """A worker killed with SIGKILL leaves every sample it had flushed."""
        script, logs, flag = tmp_path / "program.py", tmp_path / "logs", tmp_path / "flag"
        script.write_text(_KILLED)
        program = subprocess.Popen(
            [sys.executable, "-m", "raytrace_kit", "run", "--sample", str(script), str(flag)],
            env=_environment(logs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            helpers.wait_until(flag.exists, "the worker saying its samples are flushed", 240)
            pid, flushed = map(int, flag.read_text().split())
            os.kill(pid, signal.SIGKILL)
            out, err = program.communicate(timeout=240)
        finally:
            if program.poll() is None:
                program.kill()
        assert program.returncode == 0, err
        assert "Error" in out  # the driver saw its call die
        (path,) = logs.glob(f"samples-*-{pid}.jsonl")
        rows = [r for r in read_samples([path]) if r.function and "sampling_spin" in r.function]
        assert sum(r.count for r in rows) >= flushed
        hot = _line_of(_KILLED, "# the hot line")
        assert any(r.stack and r.stack[-1].line == hot for r in rows if not r.waiting)

    def test_an_async_call_holding_its_loop_is_named(self, tmp_path: Path) -> None:
        """On an event loop's thread, samples belong to the call whose task the loop runs."""
        logs = _run(tmp_path, _ASYNC, "--sample=200")
        rows = read_samples(logs.glob("samples-*.jsonl"))
        spin = [r for r in rows if r.function and r.function.endswith("SamplingLooper.spin")]
        running = sum(r.count for r in spin if not r.waiting)
        hot = _line_of(_ASYNC, "# the hot line")
        at_hot = sum(r.count for r in spin if not r.waiting and r.stack[-1].line == hot)
        assert running >= 50  # half a CPU second at 200 Hz, at least
        assert at_hot >= 0.8 * running
        assert all(r.actor_id for r in spin)  # the actor named with the call
