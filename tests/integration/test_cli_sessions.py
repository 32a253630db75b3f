"""Several Ray sessions and clusters on one machine: each command says which it read.

Real parts only: a driver script that runs a real Ray instance (in a Ray temp root of its
own, ``RAY_TMPDIR``, so that nothing here touches ``/tmp/ray``) and waits on its stdin
while the tests look at it; session directories made beside it with the kit's own
writer, one without kit records and one chowned to another uid; and ``python -m
raytrace_kit`` run as a subprocess, as users run it. Other Ray instances may run on the
machine meanwhile (a colleague's test suite): the assertions hold whatever they are.
"""

from __future__ import annotations

import inspect
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import ray

from raytrace_kit import open_session
from tests.helpers import EventFile, ray_session_dir

OTHER_UID = 12345
DEADLINE_S = 180  # Ray's start on a busy 2-core machine: generous, never a sleep

# What the programs below print as their session's directory, as Ray itself says.
SESSION_DIR = inspect.getsource(ray_session_dir) + "\n\n"

PIPELINE = """
import json, sys
import ray
from raytrace_kit import debuggable

@debuggable
@ray.remote(max_retries=0)
def stage(x):
    if x == 3:
        raise ValueError("bad input 3")
    return x

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
for x in range(5):
    try:
        ray.get(stage.remote(x))
    except ValueError:
        pass
context = ray.get_runtime_context()
print(json.dumps({"session_dir": ray_session_dir(),
                  "address": context.gcs_address}), flush=True)
sys.stdin.readline()  # the test's barrier: it closes stdin when it is done with this run
ray.shutdown()
"""


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "RAYTRACE_LOG_DIR"}}
    env["RAY_TMPDIR"] = str(root)
    return env


def _run(root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raytrace_kit", *arguments],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        env=_env(root),
    )


def _started(name: str) -> str:
    """How the line shows a session's start: its name's local time, to the second."""
    stamp = name.split("_")[1:4]
    when = datetime.strptime("_".join(stamp), "%Y-%m-%d_%H-%M-%S_%f")
    return when.strftime("%Y-%m-%d %H:%M:%S")


def _name(when: datetime) -> str:
    return f"session_{when:%Y-%m-%d_%H-%M-%S_%f}_4242"


def _read_line(process: subprocess.Popen[str]) -> str:
    """The driver's first line, waited for with a deadline (not a sleep)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], DEADLINE_S)
    assert ready, "the driver never said it was ready"
    return process.stdout.readline()


@dataclass(frozen=True)
class Live:
    """A running driver's session: its directory, its cluster's address, its script."""

    root: Path
    session_dir: Path
    address: str
    script: Path


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    """``pipeline.py`` running: 5 calls of stage (1 failed), Ray up until the module ends."""
    root = Path(tempfile.mkdtemp(prefix="rk", dir="/tmp"))  # short: Ray's socket paths
    script = root / "pipeline.py"
    script.write_text(SESSION_DIR + textwrap.dedent(PIPELINE))
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(root),
    )
    try:
        said = json.loads(_read_line(process))
        yield Live(root, Path(said["session_dir"]), said["address"], script)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()  # our own driver only
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class Machine:
    """The live session, and sessions made beside it (older, newer, another user's)."""

    live: Live
    older: Path  # kit records: 3 calls, 1 failed, 1 interrupted
    empty: Path  # newer, no kit records
    theirs: Path  # newer still, a copy of older owned by another uid


@pytest.fixture(scope="module")
def machine(live: Live) -> Machine:
    if os.getuid() != 0:
        pytest.skip("another user's session is made by chown: needs root")
    ray_root = live.session_dir.parent
    started = datetime.strptime(
        "_".join(live.session_dir.name.split("_")[1:4]), "%Y-%m-%d_%H-%M-%S_%f"
    )
    older = ray_root / _name(started - timedelta(days=1))
    events = EventFile(older / "logs" / "raytrace_kit", 100)
    for call_id in ("c1", "c2", "c3"):
        events.start(call_id, "jobs.load")
    events.end("c1")
    events.end("c2", ValueError("bad row 7"))
    events.close()
    empty = ray_root / _name(started + timedelta(minutes=1))
    (empty / "logs").mkdir(parents=True)
    theirs = ray_root / _name(started + timedelta(minutes=2))
    shutil.copytree(older, theirs)
    for place in [theirs, *theirs.rglob("*")]:
        os.chown(place, OTHER_UID, OTHER_UID)
    return Machine(live, older, empty, theirs)


class TestTheLine:
    """Every command says first, on stderr, which run it read."""

    def test_the_default_is_the_newest_of_yours_and_says_what_it_skipped(
        self, machine: Machine
    ) -> None:
        """Newer sessions without records or of another user are passed over, and counted."""
        live = machine.live
        done = _run(live.root, "report", "--json")
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"raytrace-kit: your newest run, {machine.empty} (started "
            f"{_started(machine.empty.name)}, ended), has no kit records: it failed before "
            "its first remote call, or the kit was not on in it (raytrace-kit run, "
            f"instrument() or @debuggable); read instead: {live.session_dir.name}, the "
            "newest of yours with kit records",
            f"raytrace-kit: {live.session_dir} (started {_started(live.session_dir.name)}, "
            "running, driver: pipeline.py, 1 node, 5 calls, 1 failed); the newest of yours "
            "with kit records, skipped 2 newer (1 without kit records, 1 of other users); "
            "2 others: raytrace-kit sessions",
        ]
        overview = json.loads(done.stdout)["overview"]  # stdout: the data, valid JSON
        assert (overview["source"], overview["calls"], overview["failed"]) == (
            str(live.session_dir),
            5,
            1,
        )

    def test_a_report_says_the_line_any_command_says(self, machine: Machine) -> None:
        """A report counts in its own pass over the files: the same line as events' count.

        The older run has an interrupted call (a start without an end) and a failure.
        """
        said = {
            command: _run(machine.live.root, command, str(machine.older), "--json").stderr
            for command in ("report", "events")
        }
        assert said["report"] == said["events"]
        assert said["report"].splitlines() == [
            f"raytrace-kit: {machine.older} (started {_started(machine.older.name)}, ended, "
            "1 node, 3 calls, 1 failed)"
        ]
        cut = _run(machine.live.root, "report", str(machine.older), "--since", "1970-01-01")
        assert cut.stderr == said["events"]  # a time window: the line still counts it all

    def test_an_explicit_source_is_read_as_given(self, machine: Machine) -> None:
        """A SOURCE is the one read and named, default or not; --json lines stay JSON."""
        done = _run(machine.live.root, "events", str(machine.older), "--json")
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"raytrace-kit: {machine.older} (started {_started(machine.older.name)}, ended, "
            "1 node, 3 calls, 1 failed)"
        ]
        events = [json.loads(line) for line in done.stdout.splitlines()]
        assert [(e["event"], e["call_id"]) for e in events] == [
            ("call.start", "c1"),
            ("call.start", "c2"),
            ("call.start", "c3"),
            ("call.end", "c1"),
            ("call.end", "c2"),
        ]

    def test_quiet_says_nothing_and_changes_nothing_else(self, machine: Machine) -> None:
        """--quiet: stderr empty, stdout as without it, for each command that reads a run."""
        root = machine.live.root
        for command in (["events", "--json"], ["report", "--json"]):
            said = _run(root, *command)
            quiet = _run(root, *command, "--quiet")
            assert quiet.returncode == said.returncode == 0, quiet.stderr
            assert quiet.stderr == ""
            assert len(said.stderr.splitlines()) == 2  # the newest run has no kit records
            if command[0] == "events":
                assert quiet.stdout == said.stdout
        out = machine.live.root / "trace.json"
        timeline = _run(root, "timeline", str(machine.older), "-o", str(out), "-q")
        assert (timeline.returncode, timeline.stderr, timeline.stdout) == (0, "", f"{out}\n")

    def test_none_of_yours_says_what_there_is(self, machine: Machine, tmp_path: Path) -> None:
        """No session of this user's with records: exit 3, what was found, what to do."""
        ray_root = tmp_path / "ray"
        ray_root.mkdir()
        for made in (machine.empty, machine.theirs):
            shutil.copytree(made, ray_root / made.name, symlinks=True)
            for place in [ray_root / made.name, *(ray_root / made.name).rglob("*")]:
                stat = made.stat()
                os.chown(place, stat.st_uid, stat.st_gid)
        done = _run(tmp_path, "report")
        assert done.returncode == 3
        assert done.stderr.startswith(
            f"raytrace-kit: no Ray session of yours with kit records under {ray_root} "
            "(Ray's temp root; RAY_TMPDIR moves it): 1 session(s) without kit records, "
            "1 of other users."
        )
        assert done.stdout == ""


OK_RUN = """
import ray

@ray.remote
def stage(x):
    return x

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
ray.get([stage.remote(x) for x in range(3)])
ray.shutdown()
"""

FAILED_RUN = """
import ray

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
raise ValueError("bad config")  # before any remote call: no kit record
"""


class TestANewerRunWithoutRecords:
    """The newest run has no kit records: the first line says so, and what is read instead."""

    def test_the_first_line_names_it_and_the_run_read_instead(self) -> None:
        """Two runs in one Ray temp root; the newer failed before its first remote call."""
        root = Path(tempfile.mkdtemp(prefix="rk", dir="/tmp"))  # short: Ray's socket paths
        try:
            for name, program, status in (("ok.py", OK_RUN, 0), ("fail.py", FAILED_RUN, 1)):
                (root / name).write_text(textwrap.dedent(program))
                ran = subprocess.run(
                    [sys.executable, "-m", "raytrace_kit", "run", name],
                    capture_output=True, text=True, timeout=DEADLINE_S, check=False,
                    cwd=root, env=_env(root),
                )  # fmt: skip
                assert ran.returncode == status, ran.stderr
            older, newer = sorted((root / "ray").glob("session_2*"))
            said = {command: _run(root, command) for command in ("report", "events")}
            assert said["report"].returncode == 0, said["report"].stderr
            first = (
                f"raytrace-kit: your newest run, {newer} (started {_started(newer.name)}, "
                "driver: fail.py, ended with ValueError (exit status 1)), has no kit "
                "records: it failed before its first remote call; read instead: "
                f"{older.name}, the newest of yours with kit records"
            )
            for done in said.values():  # every command that defaults to the newest says it
                lines = done.stderr.splitlines()
                assert lines[0] == first
                assert lines[1].startswith(f"raytrace-kit: {older} (started ")
                assert "3 calls, 0 failed); the newest of yours with kit records" in lines[1]
            assert said["report"].stdout.startswith("Run report: 3 calls, 0 failed")
        finally:
            shutil.rmtree(root, ignore_errors=True)


class TestSessions:
    """``raytrace-kit sessions``: the sessions with kit records, newest first."""

    def test_the_sessions_with_their_counts_as_json(self, machine: Machine) -> None:
        """Each with start, state, driver, nodes, calls, failures, owner; the default marked."""
        live = machine.live
        done = _run(live.root, "sessions", "--json")
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"raytrace-kit: {live.root / 'ray'}: 3 sessions with kit records (1 running), "
            f"1 without; the default (*) is {live.session_dir.name}, the newest of yours "
            "with kit records"
        ]
        listed = json.loads(done.stdout)
        shown = [
            (s["session"], s["running"], s["calls"], s["failures"], s["nodes"], s["yours"],
             s["default"], s["owner_uid"])
            for s in listed
        ]  # fmt: skip
        assert shown == [
            (machine.theirs.name, False, 3, 1, 1, False, False, OTHER_UID),
            (live.session_dir.name, True, 5, 1, 1, True, True, 0),
            (machine.older.name, False, 3, 1, 1, True, False, 0),
        ]
        current = listed[1]
        assert current["address"] == live.address
        driver = current["drivers"][0]  # later ones: collect's own runs, ended since
        assert (driver["job_id"], driver["script"]) == ("01000000", str(live.script))
        assert current["started"].startswith(_started(live.session_dir.name).replace(" ", "T"))
        assert [s["drivers"] for s in (listed[0], listed[2])] == [[], []]  # none had a driver

    def test_the_sessions_as_a_table(self, machine: Machine) -> None:
        """One row each, the default starred, the running one with its address."""
        live = machine.live
        done = _run(live.root, "sessions")
        assert done.returncode == 0, done.stderr
        rows = [line.split() for line in done.stdout.splitlines()]
        day, clock = _started(live.session_dir.name).split()
        assert rows[2] == [
            "*", live.session_dir.name, day, clock, "running", "at", live.address,
            "pipeline.py", "1", "5", "1", "root",
        ]  # fmt: skip
        assert [row[0] for row in (rows[1], rows[3])] == [machine.theirs.name, machine.older.name]
        assert rows[1][-1] == f"{OTHER_UID}"  # shown as "uid 12345": no name for it here


@pytest.mark.usefixtures("ray_session")
class TestCollect:
    """``collect --address auto`` names the cluster it attached to, and will not guess."""

    def test_auto_refuses_with_several_clusters_and_lists_them(
        self, live: Live, tmp_path: Path
    ) -> None:
        """Two clusters (the live one, this test's own): exit 2, both listed with addresses."""
        context = ray.get_runtime_context()
        mine = (context.gcs_address, Path(ray_session_dir()))
        dest = tmp_path / "dest"
        done = _run(live.root, "collect", "-o", str(dest))
        assert done.returncode == 2, done.stderr
        first, *listed = done.stderr.splitlines()
        assert first == (
            f"raytrace-kit collect: {len(listed)} Ray clusters are running on this machine, "
            "and --address auto would attach to one of them without saying which. Choose "
            "one with --address HOST:PORT:"
        )
        for address, session_dir in (mine, (live.address, live.session_dir)):
            (line,) = [x for x in listed if x.startswith(f"  {address}  {session_dir} (")]
            assert f"started {_started(session_dir.name)}" in line
        (line,) = [x for x in listed if x.startswith(f"  {live.address}  ")]
        assert line.endswith(", driver: pipeline.py, 1 node here)")
        assert done.stdout == ""
        assert not dest.exists()

    def test_an_address_attaches_to_that_cluster_and_names_it(
        self, live: Live, tmp_path: Path
    ) -> None:
        """--address HOST:PORT: that cluster, named; its files collected; the folder says so."""
        dest = tmp_path / "dest"
        done = _run(live.root, "collect", "--address", live.address, "-o", str(dest))
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"raytrace-kit: cluster {live.address}, {live.session_dir} (started "
            f"{_started(live.session_dir.name)}, driver: pipeline.py, 1 node alive); as given"
        ]
        assert done.stdout.splitlines()[-1] == str(dest)
        calls = open_session(dest).calls(function="stage")
        assert sorted(c.status for c in calls) == ["error", "ok", "ok", "ok", "ok"]
        shown = _run(live.root, "events", str(dest), "--json")
        (line,) = shown.stderr.splitlines()
        collected = datetime.fromtimestamp((dest / "collect.json").stat().st_mtime)
        assert line == (
            f"raytrace-kit: {dest} (collected {collected:%Y-%m-%d %H:%M:%S} from "
            f"{live.session_dir} at {live.address}, started {_started(live.session_dir.name)}, "
            "1 node, 5 calls, 1 failed)"
        )


ALONE = """
import json, subprocess, sys
import ray
from raytrace_kit import debuggable

@debuggable
@ray.remote
def stage(x):
    return x

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
ray.get([stage.remote(x) for x in range(2)])
context = ray.get_runtime_context()
done = subprocess.run([sys.executable, "-m", "raytrace_kit", "collect", "-o", sys.argv[1]],
                      capture_output=True, text=True, timeout=300)
print(json.dumps({"session_dir": ray_session_dir(),
                  "address": context.gcs_address, "rc": done.returncode,
                  "stdout": done.stdout, "stderr": done.stderr}))
ray.shutdown()
"""


def _unshare() -> str | None:
    """``unshare``, if this machine lets us run a process in a PID namespace of its own."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = [unshare, "--pid", "--fork", "--mount-proc", "true"]
    done = subprocess.run(probe, capture_output=True, check=False, timeout=60)
    return unshare if done.returncode == 0 else None


def test_auto_with_one_cluster_attaches_to_it_and_names_it(tmp_path: Path) -> None:
    """Alone in a PID namespace (no other cluster visible): auto attaches, and says where."""
    unshare = _unshare()
    if unshare is None:
        pytest.skip("needs `unshare --pid` (root): other clusters on this machine are visible")
    root = Path(tempfile.mkdtemp(prefix="rk", dir="/tmp"))
    try:
        script, dest = root / "alone.py", tmp_path / "dest"
        script.write_text(SESSION_DIR + textwrap.dedent(ALONE))
        began = time.monotonic()
        ran = subprocess.run(
            [unshare, "--pid", "--fork", "--mount-proc", sys.executable, str(script), str(dest)],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S * 2,
            check=False,
            env=_env(root),
        )
        assert ran.returncode == 0, (ran.stderr, time.monotonic() - began)
        said = json.loads(ran.stdout.splitlines()[-1])
        assert said["rc"] == 0, said["stderr"]
        session_dir = Path(said["session_dir"])
        assert said["stderr"].splitlines() == [
            f"raytrace-kit: cluster {said['address']}, {session_dir} (started "
            f"{_started(session_dir.name)}, driver: alone.py, 1 node alive); the only cluster "
            "running here"
        ]
        assert said["stdout"].splitlines()[-1] == str(dest)
        assert len(open_session(dest).calls(function="stage")) == 2
    finally:
        shutil.rmtree(root, ignore_errors=True)
