"""The sampling profiler on real Ray: programs under ``raytrace-kit run --sample``.

Each program attaches to the shared Ray instance with its own log dir (a job-level
``runtime_env``, so its workers are its own), and its CPU loops run until a condition
(CPU time spent, samples flushed), never for a fixed number of seconds.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import ray

from raytrace_kit import debuggable
from raytrace_kit._reports.profiles import read_samples
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
    from raytrace_kit._reports.profiles.samples import read_samples

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


def _run(tmp_path: Path, source: str, *options: str, driver_too: bool = False) -> Path:
    """Run ``source`` under ``raytrace-kit run --sample`` with its own log dir; that dir.

    ``driver_too``: the driver's own files (its record, its samples) go there as well.
    """
    script, logs = tmp_path / "program.py", tmp_path / "logs"
    script.write_text(source)
    env = _environment(logs)
    if driver_too:
        env["RAYTRACE_LOG_DIR"] = str(logs)
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "run", *options, str(script)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
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

    def test_a_drivers_polling_loop_waits(self, tmp_path: Path) -> None:
        """``while not done: time.sleep()``: warm, its sleep is a wait, not the hottest line."""
        logs = _run(tmp_path, _POLLING, "--sample=200", driver_too=True)
        rows = [r for r in read_samples(logs.glob("samples-*.jsonl")) if r.driver]
        line = _line_of(_POLLING, "# the polling line")
        at = [r for r in rows if r.thread == "MainThread" and r.stack[-1].line == line]
        waiting = sum(r.count for r in at if r.waiting)
        assert waiting >= 50  # most of the busy call's CPU second, at 200 Hz
        assert sum(r.count for r in at if not r.waiting) <= 0.1 * waiting


_POLLING = _HEAD + textwrap.dedent(
    """\
    @ray.remote
    def sampling_busy():
        started = time.thread_time()
        while time.thread_time() - started < 1.0:  # CPU time, not wall-clock
            sum(range(10_000))
        return 1

    ref = sampling_busy.remote()
    while not ray.wait([ref], timeout=0)[0]:
        time.sleep(0.002)  # the polling line
    print(ray.get(ref))
    """
)


_STRAGGLER = _HEAD + textwrap.dedent(
    """\
    @ray.remote
    def sampling_part(n, slow):
        started = time.thread_time()
        while time.thread_time() - started < 0.05:  # CPU time, not wall-clock
            sum(i * 3 for i in range(2_000))  # every call's line
        while slow and time.thread_time() - started < 1.6:
            sum(map(abs, range(-50_000, 50_000)))  # the straggler's line
        return n

    print(ray.get([sampling_part.remote(i, i == 7) for i in range(8)]))
    started = time.thread_time()
    while time.thread_time() - started < 0.6:
        sum(map(abs, range(-20_000, 20_000)))  # the driver's line
    """
)


def _hover(markup: str) -> dict[str, str]:
    """The flame graph's frames as a reader hovers them: ``file:line`` (or name) -> tooltip."""
    graph = helpers.pictures(markup)["flame-graph"]
    return {
        (frame.get("data-where") or helpers.tooltip(frame).split(":")[0]): helpers.tooltip(frame)
        for frame in helpers.shapes(graph, "g", "flame-frame")
    }


@pytest.fixture(scope="module")
def straggled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of eight calls, one a straggler at its own line, and a driver that computes."""
    made = tmp_path_factory.mktemp("straggler")
    return _run(made, _STRAGGLER, "--sample=200", driver_too=True)


@pytest.mark.usefixtures("ray_session")
class TestSamplingFindings:
    """What the report, the profile and the driver's samples say of a sampled run."""

    def test_the_straggler_finding_names_where_its_extra_time_went(self, straggled: Path) -> None:
        """Its evidence: the straggler's line, running, against its siblings' 0.00 s there."""
        report = json.loads(helpers.run_cli("report", str(straggled), "--json").stdout)
        (finding,) = [f for f in report["findings"] if f["kind"] == "straggler"]
        line = _line_of(_STRAGGLER, "# the straggler's line")
        assert finding["subject"].endswith("sampling_part")
        said = re.search(
            rf"its samples: ([\d.]+) s running at program\.py:{line} in sampling_part\(\) "
            r"\((\d+)% of them\), where its (\d+) sibling calls spent 0\.00 s each",
            finding["evidence"],
        )
        assert said is not None, finding["evidence"]
        assert float(said[1]) >= 1.0  # most of its 1.6 CPU seconds, at 200 Hz
        assert int(said[2]) >= 50

    def test_the_html_report_draws_the_hot_lines_in_a_flame_graph(
        self, straggled: Path, tmp_path: Path
    ) -> None:
        """The flame graph's frames: the straggler's line under its function, the driver's."""
        page = tmp_path / "report.html"
        done = helpers.run_cli("report", str(straggled), "--html", str(page))
        assert done.returncode == 0, done.stderr
        hover = _hover(page.read_text())
        hot = _line_of(_STRAGGLER, "# the straggler's line")
        (where,) = [w for w in hover if w.endswith(f"program.py:{hot}")]
        assert hover[where].startswith(f"sampling_part ({where}): ")
        share = int(re.search(r"(\d+)% of the samples", hover[where])[1])  # type: ignore[index]
        assert share >= 25  # the run's busiest line (1.6 of about 2.6 CPU seconds sampled)
        (function,) = [w for w in hover if w.endswith("sampling_part")]
        assert hover[function].startswith("__main__.sampling_part: ")
        driver = _line_of(_STRAGGLER, "# the driver's line")
        assert "driver (program.py)" in hover
        assert [w for w in hover if w.endswith(f"program.py:{driver}")]
        assert "<script" not in page.read_text()

    def test_the_driver_is_sampled_from_its_script_down(self, straggled: Path) -> None:
        """The driver's running samples: at its line, its stacks starting at the script."""
        rows = [r for r in read_samples(straggled.glob("samples-*.jsonl")) if r.driver]
        assert {Path(r.driver or "").name for r in rows} == {"program.py"}
        assert {r.function for r in rows} == {None}  # no call runs in the driver
        main = [r for r in rows if r.thread == "MainThread"]
        launcher = ("launch.py", "runpy.py", "__main__.py", os.path.join("cli", "run.py"))
        assert not [f for r in main for f in r.stack if f.file.endswith(launcher)]
        script = [r for r in main if any(f.file.endswith("program.py") for f in r.stack)]
        assert {(r.stack[0].name, Path(r.stack[0].file).name) for r in script} == {
            ("<module>", "program.py")
        }  # the script's first frame is the root: the launcher's are left out
        line = _line_of(_STRAGGLER, "# the driver's line")
        at = sum(r.count for r in main if not r.waiting and r.stack[-1].line == line)
        assert at >= 40  # most of its 0.6 CPU seconds, at 200 Hz
        out = _profile(straggled, "speedscope")
        names = [p["name"] for p in json.loads(out.read_text())["profiles"]]
        assert [n for n in names if n.startswith("driver program.py (") and "MainThread" in n]

    def test_no_kit_frame_is_in_a_calls_stacks(self, straggled: Path) -> None:
        """The kit's frames at a call's start and end are left out, as the boundary's."""
        rows = [r for r in read_samples(straggled.glob("samples-*.jsonl")) if r.function]
        assert rows
        kit = os.path.join("src", "raytrace_kit", "")
        assert not [f for r in rows for f in r.stack if kit in f.file]

    @pytest.mark.parametrize("fmt", ["collapsed", "pprof", "speedscope"])
    def test_profile_to_stdout(self, straggled: Path, tmp_path: Path, fmt: str) -> None:
        """``-o -`` writes the profile to stdout (pprof's bytes too), no file named ``-``."""
        done = subprocess.run(
            [sys.executable, "-m", "raytrace_kit", "profile", str(straggled), "--format", fmt,
             "--function", "sampling_part", "-o", "-"],
            cwd=tmp_path, capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert not (tmp_path / "-").exists()
        assert b"written to stdout" in done.stderr
        (tmp_path / f"out.{fmt}").write_bytes(done.stdout)
        lines = _LEAF_LINES[fmt](tmp_path / f"out.{fmt}")
        hot = ("program.py", _line_of(_STRAGGLER, "# the straggler's line"))
        assert max(lines, key=lines.__getitem__) == hot


def test_a_rate_given_with_a_space_is_named_the_fix(tmp_path: Path) -> None:
    """``run --sample 250 app.py``: exit 2, and the message says ``--sample=250``."""
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "run", "--sample", "250", "app.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "raytrace-kit run: --sample 250 reads 250 as the script" in done.stderr
    assert "--sample=250" in done.stderr


HERE = Path(__file__)


def _here_line(marker: str) -> int:
    """The line of this file that ends with ``marker`` (a comment on the line)."""
    lines = enumerate(HERE.read_text().splitlines(), 1)
    return next(n for n, text in lines if text.rstrip().endswith(marker))


def _watch_own_samples(
    function: str, line: int, waiting: bool, flag: str, enough: int = 100
) -> None:
    """In the worker: once its call's samples at ``line`` are on disk (``enough``), say so."""
    import raytrace_kit  # noqa: PLC0415 -- in the worker

    mine = f"-{os.getpid()}.jsonl"
    while True:
        files = [p for p in raytrace_kit.log_dir().glob("samples-*.jsonl") if p.name.endswith(mine)]
        at = sum(r.count for r in read_samples(files) if (r.function or "").endswith(function)
                 and r.waiting == waiting and r.stack and r.stack[-1].line == line)  # fmt: skip
        if at >= enough:
            Path(flag + ".tmp").write_text(str(at))
            os.rename(flag + ".tmp", flag)
            return
        threading.Event().wait(0.05)  # a poll of a condition, not a race


@debuggable(sample=200)
@ray.remote(num_cpus=0)
def sampling_holder(flag: str, release: str) -> int:
    lock = threading.Lock()
    lock.acquire()

    def watch() -> None:  # a thread of the user's: not the call's, its samples say "no call"
        # 5 s of samples at 200 Hz: it has run that long (stuck's unmoved calls have)
        _watch_own_samples("sampling_holder", _here_line("# the holder waits"), True, flag, 1000)
        while not os.path.exists(release):
            threading.Event().wait(0.05)
        lock.release()

    threading.Thread(target=watch, daemon=True).start()
    lock.acquire()  # the holder waits
    return 1


@debuggable(sample=200)
@ray.remote(num_cpus=0)
def sampling_spinner(flag: str, release: str) -> int:
    spun = threading.Event()

    def watch() -> None:
        _watch_own_samples("sampling_spinner", _here_line("# the spinner's line"), False, flag)
        spun.set()

    threading.Thread(target=watch, daemon=True).start()
    while not spun.is_set():
        sum(map(abs, range(-100_000, 100_000)))  # the spinner's line
    while not os.path.exists(release):
        threading.Event().wait(0.05)
    return 2


@pytest.mark.usefixtures("ray_session")
def test_stuck_and_top_read_the_samples_of_calls_in_flight(tmp_path: Path) -> None:
    """Stuck: the holder's last samples all waiting at its line; top: the spinner's hot line."""
    release, held, spun = (str(tmp_path / name) for name in ("release", "held", "spun"))
    refs = [sampling_holder.remote(held, release), sampling_spinner.remote(spun, release)]
    try:
        helpers.wait_until(lambda: os.path.exists(held) and os.path.exists(spun),
                           "both calls' samples on disk", 240)  # fmt: skip
        address = ray.get_runtime_context().gcs_address
        done = helpers.run_cli("stuck", "--address", address, "--json")
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        (holder,) = [c for c in found["calls"] if c["function"].endswith("sampling_holder")]
        samples = holder["samples"]
        hold = _here_line("# the holder waits")
        assert samples["where"] == f"{HERE}:{hold}"
        assert samples["state"] == "waiting"
        assert samples["share"] >= 0.99  # it has not moved: its samples there, but its start's
        assert samples["text"].startswith("in the last 10 s, 100% of its samples (")
        assert samples["text"].endswith(f"waiting at test_sampling.py:{hold} in sampling_holder()")
        assert holder["call_id"] in [c["call_id"] for c in found["unmoved"]]
        text = helpers.run_cli("stuck", "--address", address).stdout
        assert "Calls that have not moved" in text
        assert f"waiting at test_sampling.py:{hold} in sampling_holder()" in text

        done = helpers.run_cli("top", "--address", address, "--once", "--json")
        assert done.returncode == 0, done.stderr
        lines = [h for h in json.loads(done.stdout)["hot_lines"]
                 if (h["function"] or "").endswith("sampling_spinner")]  # fmt: skip
        assert lines, "the spinner's lines in top's hottest lines"
        assert (Path(lines[0]["file"]).name, lines[0]["line"], lines[0]["name"]) == (
            HERE.name, _here_line("# the spinner's line"), "sampling_spinner",
        )  # fmt: skip
        shown = helpers.run_cli("top", "--address", address, "--once").stdout
        assert "Hottest lines (running samples so far)" in shown
        spin = _here_line("# the spinner's line")
        assert f"test_sampling.py:{spin}" in shown
    finally:
        Path(release).touch()
    assert ray.get(refs, timeout=120) == [1, 2]
