"""report(): a real run's failures, deaths, time and findings, named where the user looks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import ray
from ray.exceptions import WorkerCrashedError

import raytrace_kit
from raytrace_kit import Report, debuggable
from tests import helpers


@debuggable
@ray.remote
def tiny(x: int) -> int:
    return x + 1


@debuggable
@ray.remote
def step(x: int) -> int:
    return x


@debuggable
@ray.remote
def one_by_one(n: int) -> int:
    return sum(ray.get(step.remote(i)) for i in range(n))  # the ray.get-in-a-loop pattern


@debuggable
@ray.remote
def parse_record(text: str) -> int:
    return int(text)


@debuggable
@ray.remote(max_retries=0)
def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@debuggable
@ray.remote(max_retries=0)
def segfault() -> None:
    import ctypes  # noqa: PLC0415

    ctypes.string_at(0)  # reads address 0: SIGSEGV in native code


@debuggable
@ray.remote
class Ledger:
    """A sync actor: its calls run one at a time, in the order they arrive."""

    def record(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


@debuggable
@ray.remote
def flaky(counter: str) -> str:
    path = Path(counter)
    seen = int(path.read_text()) if path.exists() else 0
    path.write_text(str(seen + 1))
    if seen == 0:
        raise ConnectionError("first attempt fails")
    return "ok"


@debuggable
@ray.remote
class Hoarder:
    """Keeps what each call makes: the leak signature."""

    def __init__(self) -> None:
        self.kept: list[bytearray] = []

    def add(self, mib: int) -> int:
        block = bytearray(mib * 2**20)
        block[::4096] = b"x" * len(block[::4096])  # touch the pages: RSS grows
        self.kept.append(block)
        return len(self.kept)


@pytest.mark.usefixtures("ray_session")
def test_leak_signature_and_merged_timeline(tmp_path: Path) -> None:
    """An actor whose memory grows call after call is named; timeline() merges Ray's events."""
    hoarder = Hoarder.remote()
    for _ in range(6):
        ray.get(hoarder.add.remote(16))
    made = raytrace_kit.report()
    # The session holds other tests' calls too: this leak is the one naming Hoarder.add.
    leaks = [f for f in made.findings if f.title.startswith("Memory grows call after call")]
    (leak,) = [f for f in leaks if ".Hoarder.add" in f.evidence]
    assert "profile_scope='actor'" in leak.fix
    assert "memray flamegraph --leaks" in leak.fix
    # Only the calls that grew it are named: never __init__, never a +0 MiB call.
    assert "__init__" not in leak.evidence
    assert "+0 MiB" not in leak.evidence
    assert "(most: add call " in leak.evidence
    trace = json.loads(raytrace_kit.timeline(None, tmp_path / "t.json", merge_ray=True).read_text())
    ours = [e for e in trace["traceEvents"] if e.get("args", {}).get("call_id")]
    rays = [e for e in trace["traceEvents"] if not e.get("args", {}).get("call_id")]
    assert ours
    # Ray's own slices of the same calls (named by method) and of its task phases.
    assert any(e.get("ph") == "X" and e.get("name") == "add" for e in rays)
    assert any(str(e.get("name")).startswith("task:") for e in rays)


@pytest.mark.compat
@pytest.mark.usefixtures("ray_session")
def test_report_names_failures_deaths_and_findings(tmp_path: Path) -> None:
    ray.get([tiny.remote(i) for i in range(30)])
    assert ray.get(one_by_one.remote(6)) == 15
    with pytest.raises(ValueError, match="invalid literal"):
        ray.get(parse_record.remote("x7"))
    with pytest.raises(WorkerCrashedError):
        ray.get(crash.remote())
    options = {"max_retries": 2, "retry_exceptions": [ConnectionError]}
    assert ray.get(flaky.options(**options).remote(str(tmp_path / "n"))) == "ok"

    # Only this test's calls: a session of the files, filtered by time, as a user would.
    session = raytrace_kit.open_session()
    calls = [c for c in session.calls() if c.started >= helpers.window_start()]
    assert calls
    made = raytrace_kit.report(session)

    failure = next(f for f in made.failures if f["function"].endswith(".parse_record"))
    assert failure["error_type"] == "ValueError"
    assert "    return int(text)" in failure["traceback"]
    assert any(i["function"].endswith(".crash") for i in made.interrupted)
    titles = [f.title for f in made.findings]
    assert any(t.startswith("Tasks too small") and t.endswith(".tiny") for t in titles)
    assert any("one at a time" in t and t.endswith(".one_by_one") for t in titles)
    retries = next(f for f in made.findings if f.title.startswith("Retries hide flaky"))
    assert ".flaky (1)" in retries.evidence

    text = str(made)
    assert "Findings" in text
    assert "return int(text)" in text
    assert "refs = [f.remote(x) for x in xs]" in text  # fixes print as written
    json.dumps(made.to_dict())  # machine-readable as is
    page = made.save_html(tmp_path / "report.html")
    assert "parse_record" in page.read_text()

    shown = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "report", str(session.root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["overview"]["calls"] >= len(calls)


def _report_until(predicate: object, since: str, timeout: float = 20.0) -> Report:
    """The report of calls since ``since``, once ``predicate(report)`` holds.

    Ray's GCS writes a worker's exit record a moment after ray.get has raised.
    """
    deadline = time.monotonic() + timeout
    while True:
        made = raytrace_kit.report(since=since)
        if predicate(made) or time.monotonic() > deadline:  # type: ignore[operator]
            return made
        time.sleep(0.5)


def _cause_of(made: Report, suffix: str) -> str | None:
    return next((i["cause"] for i in made.interrupted if i["function"].endswith(suffix)), None)


@pytest.mark.usefixtures("ray_session")
def test_deaths_are_explained_from_rays_own_records() -> None:
    """A SIGKILLed worker and a segfault: Ray's records say which, the report says so."""
    since = helpers.window_start()
    with pytest.raises(WorkerCrashedError):
        ray.get(crash.remote())
    with pytest.raises(WorkerCrashedError):
        ray.get(segfault.remote())
    made = _report_until(lambda r: _cause_of(r, ".crash") and _cause_of(r, ".segfault"), since)
    assert made.overview["interrupted"] == 2  # the window holds only this test's calls
    assert _cause_of(made, ".segfault") == "crashed in native code: SIGSEGV, exit status 139"
    # A worker of a few dozen MiB is no OOM killer's pick: the other causes, not memory.
    (row,) = [i for i in made.interrupted if i["function"].endswith(".crash")]
    held = (
        f"holding only {row['rss_start_bytes'] / 2**20:.0f} MiB at its last record (this "
        "call's start)"
    )
    assert (_cause_of(made, ".crash") or "").startswith(
        f"vanished without Python shutting down while {held}"
    )
    titles = {f.title: f for f in made.findings}
    crash_finding = titles["Native crashes during calls"]
    assert ".segfault never ended" in crash_finding.evidence
    assert "faulthandler" in crash_finding.fix
    killed = titles["Processes killed during calls (SIGKILL or os._exit)"]
    assert ".crash never ended" in killed.evidence
    # dmesg first (the call may have grown after its start), then the other causes.
    assert killed.fix.startswith("first dmesg on that node: 'Out of memory: Killed process")
    assert "os._exit(" in killed.fix
    text = str(made)
    assert "why (Ray's records)" in text
    assert "SIGSEGV" in text


@pytest.mark.usefixtures("ray_session")
def test_one_actor_serializing_the_work_is_named() -> None:
    """Calls queued on one sync actor run back to back: named. Spaced out, they are not."""
    since = helpers.window_start()
    ledger = Ledger.remote()
    # All queued at once; calls of 0.3 s allow gaps up to 30 ms (a tenth of a call), which
    # hold on a busy machine, where Ray's hand-over from one call to the next slows too.
    ray.get([ledger.record.remote(0.3) for _ in range(8)])
    serial = [f for f in raytrace_kit.report(since=since).findings if "serializes" in f.title]
    assert len(serial) == 1
    assert serial[0].title.startswith("One actor serializes the work: ")
    assert serial[0].title.split(": ", 1)[1].startswith(f"{__name__}.Ledger (")
    assert "its 8 calls ran back to back" in serial[0].evidence
    assert "ray.util.ActorPool" in serial[0].fix

    now = datetime.now(timezone.utc)
    for _ in range(6):  # the caller waits between calls: the actor is not the queue
        ray.get(ledger.record.remote(0.02))
        time.sleep(0.1)
    made = raytrace_kit.report(since=now)
    assert made.overview["calls"] == 6
    assert not [f for f in made.findings if "serializes" in f.title]


@debuggable
@ray.remote
def long_step(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@debuggable
@ray.remote(num_cpus=1)
def hash_in_threads(mib: int) -> float:
    """Threads hashing at once (hashlib lets go of the GIL); their own CPU seconds, summed."""
    import hashlib  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    block = b"x" * (mib * 2**20)

    def hash_block(_: int) -> float:
        started = time.thread_time()
        hashlib.sha256(block).digest()
        return time.thread_time() - started

    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(hash_block, range(32)))


@pytest.mark.usefixtures("ray_session")
def test_a_call_still_running_is_not_called_dead() -> None:
    since = helpers.window_start()
    ref = long_step.remote(4.0)
    deadline = time.monotonic() + 30
    while not raytrace_kit.open_session().calls(function="long_step", status="interrupted"):
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.2)
    made = raytrace_kit.report(since=since)
    (row,) = [i for i in made.interrupted if i["function"].endswith(".long_step")]
    assert (row["state"], row["cause"]) == ("running", "still running, no end yet")
    assert made.overview["running"] == 1
    assert made.overview["interrupted"] == 0
    assert not [f for f in made.findings if f.kind.startswith("death")]
    assert "1 still running" in str(made)
    assert ray.get(ref) == 4.0


@pytest.mark.usefixtures("ray_session")
def test_cpu_oversubscription_is_seen_through_the_process_cpu_time() -> None:
    """A library's threads show in the call's process CPU time, not in its thread's.

    CPU time only (no wall time): on a busy machine the threads get fewer cores, but the
    CPU they use is theirs. The finding's rule over such records is in
    tests/unit/test_tally.py.
    """
    pool_cpu = ray.get(hash_in_threads.remote(16))
    (call,) = raytrace_kit.open_session().calls(function="hash_in_threads")[-1:]
    assert call.process_cpu_s is not None
    assert call.cpu_s is not None
    assert pool_cpu > 0.2
    assert call.process_cpu_s >= 0.95 * pool_cpu  # every thread's CPU is in the call's...
    assert call.cpu_s < 0.25 * pool_cpu  # ...while the calling thread mostly waits


@debuggable
@ray.remote
class Napper:
    def nap(self, seconds: float) -> float:
        time.sleep(seconds)  # at least this long: a floor, not a margin
        return seconds


@pytest.mark.usefixtures("ray_session")
def test_clocks_are_read_unless_the_last_call_was_short() -> None:
    """The process's clock is skipped after a call under 10 ms, the thread's under 1 ms.

    What a user sees in the calls: the first call has both figures; a call after one
    under 1 ms has neither; after one of 1 to 10 ms only the thread's (cpu_s); after one
    of 10 ms or more both again. Judged by the durations the calls record (a busy
    machine may stretch a call of 0 s past 1 ms: the rule holds for what happened).
    """
    napper = Napper.remote()
    naps = [0.0, 0.0, 0.02, 0.005, 0.0, 0.0]
    for seconds in naps:  # one at a time: each call's "last call" is the one before
        assert ray.get(napper.nap.remote(seconds)) == seconds
    calls = raytrace_kit.open_session().calls(function="Napper.nap")[-len(naps) :]
    took = [c.duration_s for c in calls]
    assert all(d is not None and d >= s for d, s in zip(took, naps, strict=True)), took
    before = [None, *took[:-1]]  # each call's last call's duration (the first: none)
    thread = [last is None or last >= 0.001 for last in before]
    process = [last is None or last >= 0.01 for last in before]
    assert [c.cpu_s is not None for c in calls] == thread, took
    assert [c.process_cpu_s is not None for c in calls] == process, took
    assert (thread[3], process[3]) == (True, True)  # after the 20 ms nap: both, always


@pytest.mark.usefixtures("ray_session")
def test_the_report_after_shutdown_is_of_the_run_that_ended() -> None:
    """report() with no source, after ray.shutdown() in the same script: that run's."""
    since = helpers.window_start()
    assert ray.get(tiny.remote(41)) == 42
    ray.shutdown()
    try:
        made = raytrace_kit.report(since=since)
        assert made.overview["calls"] == 1
        assert made.slowest[0]["function"].endswith(".tiny")
    finally:
        helpers.start_shared_ray()


@debuggable
@ray.remote(max_restarts=0)
class Doomed:
    """Holds memory across calls, then is killed: the process was big at its last record."""

    def __init__(self) -> None:
        self.kept = bytearray()

    def grow(self, mib: int) -> int:
        self.kept = bytearray(mib * 2**20)
        self.kept[::4096] = b"x" * len(self.kept[::4096])  # touch the pages: RSS grows
        return mib

    def die(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.usefixtures("ray_session")
def test_a_killed_process_that_held_much_memory_is_memory_advice() -> None:
    """Over a GiB at its last record: the OOM killer stays the likely cause."""
    since = helpers.window_start()
    doomed = Doomed.remote()
    assert ray.get(doomed.grow.remote(1100)) == 1100
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(doomed.die.remote())
    made = _report_until(lambda r: _cause_of(r, ".die") is not None, since)
    assert (_cause_of(made, ".die") or "").startswith(
        "vanished without Python shutting down: SIGKILL (exit status 137, most often the "
        "kernel's OOM killer"
    )


@debuggable(log_args=True)
@ray.remote
def pause(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.mark.usefixtures("ray_session")
def test_a_straggler_is_named_with_its_task_node_and_arguments() -> None:
    """One call of 3 s among calls of 0.05 s: named, with where it ran and its arguments."""
    since = helpers.window_start()
    assert ray.get([pause.remote(0.05) for _ in range(7)] + [pause.remote(3.0)])[-1] == 3.0
    made = raytrace_kit.report(since=since)
    (finding,) = [f for f in made.findings if f.kind == "straggler"]
    assert finding.subject.endswith(".pause")
    slowest = max(
        (c for c in raytrace_kit.open_session().calls(function="pause") if c.started >= since),
        key=lambda c: c.duration_s or 0.0,
    )
    task = (slowest.task_id or "")[:16]
    assert task
    assert f"task {task}, node {(slowest.node_id or '')[:12]}, pid {slowest.pid}" in (
        finding.evidence
    )
    assert "arguments ['3.0'] {}" in finding.evidence
    assert finding.evidence.startswith(f"one call took {slowest.duration_s:.2f} s")
    assert f"raytrace-kit explain --task {task}" in finding.fix


@pytest.mark.usefixtures("ray_session")
def test_calls_of_one_size_have_no_straggler() -> None:
    """No false alarm: calls that all take about as long give no straggler finding."""
    since = helpers.window_start()
    ray.get([pause.remote(0.2) for _ in range(8)])
    made = raytrace_kit.report(since=since)
    assert not [f for f in made.findings if f.kind == "straggler"]


@debuggable
@ray.remote
class Sleeper:
    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


@debuggable
@ray.remote
def stage(x: int) -> int:
    return x


@pytest.mark.usefixtures("ray_session")
def test_submission_records_find_a_queue_and_a_loop_without_instrument() -> None:
    """Calls queued at once on one actor (the seeds' Sleeper) and ray.get in a driver loop.

    With no driver record (no instrument()), the submission records say it: the actor's
    calls waited for each other in its queue; the loop's calls were each submitted after
    the one before ended. Both are what the calls do, whatever the machine's speed.
    """
    since = helpers.window_start()
    sleeper = Sleeper.remote()
    assert ray.get([sleeper.sleep.remote(0.3) for _ in range(5)]) == [0.3] * 5
    for i in range(6):
        assert ray.get(stage.remote(i)) == i  # the driver's loop
    # A new actor called from a loop: its first call waited for it to be created, and
    # none for another call: not an actor that serializes the work.
    polled = Sleeper.remote()
    for _ in range(6):
        assert ray.get(polled.sleep.remote(0.01)) == 0.01
    made = raytrace_kit.report(since=since)
    (serial,) = [f for f in made.findings if f.kind == "serializing_actor"]
    assert serial.title.endswith(f"({sleeper._actor_id.hex()[:12]})")
    assert "calls submitted together waited for each other in its queue" in serial.evidence
    line = next(
        number
        for number, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if text.rstrip().endswith("# the driver's loop")
    )
    loops = {f.subject: f for f in made.findings if f.kind == "driver_loop"}
    loop = loops[f"{__file__}:{line}"]
    assert loop.evidence.startswith(f"5 of the 6 calls submitted at {__file__}:{line}")
    (said,) = [text for text in str(made).splitlines() if f"{__file__}:{line} " in text]
    assert said.startswith(
        f"- ray.get in a loop in the driver: {__file__}:{line} waited on 6 calls of "
        f"{__name__}.stage one at a time: "
    )  # the report's text names the function and how many of its calls
    (queued,) = [q for q in made.queued if q["function"].endswith(".Sleeper.sleep")]
    assert queued["count"] == 5 + 6  # the two actors' calls
    assert queued["max_s"] >= 4 * 0.3 * 0.9  # the fifth waited for the four before it
    assert made.never_started == []
    ray.kill(sleeper)
    ray.kill(polled)
