"""Attaching to clusters as users start them, from a shell with no Ray variables at all.

Each cluster runs in processes of its own, started with an environment scrubbed of every
``RAY_*`` and ``RAYTRACE_*`` variable, as a user's terminal has it: a plain ``ray.init()``
in the script (Ray 2.60 turns token authentication on, the token in Ray's own file), ``ray
start --head`` and a driver that joins it, and a cluster with token authentication off.
Every command that connects runs from another scrubbed shell, and must attach and answer.
Then each reason a connection cannot be made: named in one line, in under 5 s, without
Ray's C++ log lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raytrace_kit._ray_compat import cluster as ray_cluster
from tests import helpers

pytestmark = pytest.mark.compat

TOKENS = ray_cluster.has_token_auth()  # Ray 2.52+: token authentication exists

# A job as a user writes it: a function that fails on every row, then, until told to stop,
# a step at a time (so that `tail` has records to follow), and a call that never returns.
JOB = textwrap.dedent(
    """
    import os, sys, threading, time
    import ray

    joins = os.environ.get("JOB_ADDRESS")
    # "local": a cluster of its own, as a plain ray.init() starts on a machine running none
    # (another test's cluster may have left its address in /tmp/ray/ray_current_cluster).
    ray.init(address=joins or "local", num_cpus=None if joins else 2)

    @ray.remote(max_retries=0)
    def boom(row):
        raise ValueError(f"bad row {row}")

    @ray.remote
    def step(i):
        return i

    @ray.remote
    def hang():
        threading.Event().wait()

    for ref in [boom.remote(row) for row in range(3)]:
        try:
            ray.get(ref)
        except ray.exceptions.RayTaskError:
            pass
    forever = hang.remote()
    print("ADDRESS", ray.get_runtime_context().gcs_address, flush=True)
    stop = sys.argv[1]
    i = 0
    while not os.path.exists(stop):
        ray.get(step.remote(i))
        i += 1
        time.sleep(0.05)
    print("STOPPED", flush=True)
    time.sleep(3600)
    """
)


def scrubbed(**extra: str) -> dict[str, str]:
    """This environment less every Ray and raytrace_kit variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "RAYTRACE_"))}
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


class Job:
    """The job above under ``raytrace-kit run``, in a process group of its own."""

    def __init__(self, kind: str, directory: Path, env: dict[str, str]) -> None:
        self.kind = kind
        script = directory / "job.py"
        script.write_text(JOB)
        self.stop = directory / "stop"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "raytrace_kit", "run", str(script), str(self.stop)],
            cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True,
        )  # fmt: skip
        lines: list[str] = []
        threading.Thread(
            target=lambda: lines.extend(self.process.stdout or []), daemon=True
        ).start()
        said = helpers.wait_until(
            lambda: next((line for line in list(lines) if line.startswith("ADDRESS")), None),
            "the job says its cluster's address",
            timeout=120,
        )
        self.address = said.split()[1]

    def close(self) -> None:
        self.stop.touch()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)  # ray.init's cluster ends with it
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@contextlib.contextmanager
def ray_start_head(env: dict[str, str], temp_dir: Path) -> Iterator[str]:
    """``ray start --head --block`` (its own process group); yields the cluster's address.

    In a temp dir of its own: the default one's ``ray_current_cluster`` would send every
    later plain ``ray.init()`` on this machine to it, even after it stopped.
    """
    port = free_port()
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", "--block",
         f"--temp-dir={temp_dir}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        address = f"{socket.gethostbyname(socket.gethostname())}:{port}"
        helpers.wait_until(lambda: _listens(port), "ray start's GCS listens", timeout=120)
        yield address
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)  # --block: it stops what it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


KINDS = ["ray.init() in the script", "ray start --head", "token authentication off"]
# The cluster a plain ray.init() starts: the one the refusals are tried on.
DEFAULT = pytest.mark.parametrize("cluster", [KINDS[0]], indirect=True)


@pytest.fixture(scope="module", params=KINDS)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Job]:
    """A running job on a cluster of each kind, started from a scrubbed shell."""
    directory = tmp_path_factory.mktemp("job")
    if request.param == "ray start --head":
        with ray_start_head(scrubbed(), tmp_path_factory.mktemp("ray")) as address:
            # Ray's own drivers join a token cluster only with the mode exported (as `ray
            # status` does): the user's job has it, the kit's shell below does not.
            mode = {"RAY_AUTH_MODE": "token"} if TOKENS else {}
            job = Job(request.param, directory, scrubbed(JOB_ADDRESS=address, **mode))
            try:
                yield job
            finally:
                job.close()
        return
    extra = {"RAY_AUTH_MODE": "disabled"} if request.param == "token authentication off" else {}
    job = Job(request.param, directory, scrubbed(**extra))
    try:
        yield job
    finally:
        job.close()


def command(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``raytrace-kit ARGUMENTS`` from a scrubbed shell (or ``env``)."""
    return subprocess.run(
        [sys.executable, "-m", "raytrace_kit", *arguments],
        env=env or scrubbed(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def answered(done: subprocess.CompletedProcess[str], address: str) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"raytrace-kit: cluster {address}"), done.stderr
    assert "gcs_client.cc" not in done.stderr  # none of Ray's C++ retries


class TestAttachesAsStarted:
    """Every command that connects attaches to each kind of cluster from a plain shell."""

    def test_stuck_names_the_hanging_call(self, cluster: Job) -> None:
        """stuck: the call that never returns is in flight, running, by its name."""
        done = command("stuck", "--address", cluster.address, "--json")
        answered(done, cluster.address)
        found = json.loads(done.stdout)
        running = [c for c in found["calls"] if c["function"].endswith("hang")]
        assert [c["state"] for c in running] == ["running"], found["calls"]

    def test_top_shows_the_failing_function(self, cluster: Job) -> None:
        """Top --once: boom failed three times, with its error."""
        done = command("top", "--once", "--json", "--address", cluster.address)
        answered(done, cluster.address)
        view = json.loads(done.stdout)
        (boom,) = [f for f in view["functions"] if f["function"].endswith("boom")]
        assert boom["failed"] == 3
        assert any("bad row" in str(f.get("error")) for f in view["failures"])

    def test_report_counts_the_failures(self, cluster: Job) -> None:
        """Report --address: the run's failures, counted on the nodes."""
        done = command("report", "--address", cluster.address, "--json")
        answered(done, cluster.address)
        report = json.loads(done.stdout)
        (boom,) = [g for g in report["failures"] if g["function"].endswith("boom")]
        assert boom["count"] == 3, report["failures"]
        assert boom["error_type"] == "ValueError"

    def test_tail_shows_submissions_and_the_drivers_records(self, cluster: Job) -> None:
        """tail: the driver's call.submit lines beside the calls' own, and driver records."""
        follower = subprocess.Popen(
            helpers.cli_command("tail", "--address", cluster.address, "--json"),
            env=scrubbed(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        lines: list[dict[str, Any]] = []
        threading.Thread(
            target=lambda: lines.extend(json.loads(line) for line in follower.stdout or []),
            daemon=True,
        ).start()

        def shown() -> set[str]:
            return {e["event"] for e in list(lines)}

        try:
            helpers.wait_until(
                lambda: (
                    {"call.submit", "call.start", "call.end"} <= shown()
                    and any(kind.startswith("driver.") for kind in shown())
                ),
                "tail shows submissions, calls and the driver's records",
            )
        finally:
            follower.send_signal(signal.SIGINT)
            _, said = follower.communicate(timeout=60)
        assert said.startswith(f"raytrace-kit: cluster {cluster.address}"), said
        submitted = [e for e in lines if e["event"] == "call.submit"]
        assert {e["function"].rsplit(".", 1)[-1] for e in submitted} == {"step"}


class TestCannotConnect:
    """Each reason a connection fails: one line that says it, fast, with the fix."""

    def quick(self, *arguments: str, env: dict[str, str] | None = None) -> str:
        started = time.monotonic()
        done = command(*arguments, env=env)
        took = time.monotonic() - started
        assert done.returncode == 1, done
        assert took < 5 + helpers_start_allowance(), took
        assert "gcs_client.cc" not in done.stderr, done.stderr
        (line,) = done.stderr.splitlines()
        return line

    def test_nothing_listening(self) -> None:
        """A port nobody listens on: refused, named at once."""
        line = self.quick("stuck", "--address", f"127.0.0.1:{free_port()}")
        assert "nothing listens at" in line
        assert "connection refused" in line

    def test_a_port_that_never_answers(self) -> None:
        """A port that accepts and never speaks: given up on within seconds."""
        with socket.socket() as silent:
            silent.bind(("", 0))
            silent.listen(8)
            line = self.quick("top", "--once", "--address", f"127.0.0.1:{silent.getsockname()[1]}")
        assert "does not answer as a Ray cluster's GCS" in line

    @DEFAULT
    @pytest.mark.skipif(not TOKENS, reason="this Ray has no token authentication")
    def test_no_token_on_this_machine(self, cluster: Job, tmp_path: Path) -> None:
        """A token cluster, and a home without Ray's token file: refused, with the fix."""
        line = self.quick("stuck", "--address", cluster.address, env=scrubbed(HOME=str(tmp_path)))
        assert "authentication refused" in line
        assert "this machine has none" in line
        assert "ray get-auth-token" in line

    @DEFAULT
    @pytest.mark.skipif(not TOKENS, reason="this Ray has no token authentication")
    def test_another_token(self, cluster: Job, tmp_path: Path) -> None:
        """A token that is not the cluster's: refused, saying so."""
        wrong = tmp_path / "token"
        wrong.write_text("0" * 32)
        line = self.quick(
            "report", "--address", cluster.address, env=scrubbed(RAY_AUTH_TOKEN_PATH=str(wrong))
        )
        assert "does not accept this machine's Ray token" in line

    @DEFAULT
    @pytest.mark.skipif(not TOKENS, reason="this Ray has no token authentication")
    def test_token_mode_turned_off_in_the_shell(self, cluster: Job) -> None:
        """RAY_AUTH_MODE=disabled exported, a token cluster: refused, naming the variable."""
        line = self.quick(
            "tail", "--address", cluster.address, env=scrubbed(RAY_AUTH_MODE="disabled")
        )
        assert "RAY_AUTH_MODE=disabled in this shell" in line

    @DEFAULT
    def test_another_ray_version(self, cluster: Job) -> None:
        """A cluster that says it runs another Ray: named before Ray would join it."""
        with _cluster_says_version(cluster.address, "2.0.0"):
            line = self.quick("stuck", "--address", cluster.address)
        assert "runs Ray 2.0.0" in line
        assert "cluster's Python environment" in line


def helpers_start_allowance() -> float:
    """The interpreter's own start and the kit's import, measured here (not the connection)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import raytrace_kit.cli, ray"], check=True)
    return time.monotonic() - started


@contextlib.contextmanager
def _cluster_says_version(address: str, ray_version: str) -> Iterator[None]:
    """The cluster's recorded metadata says ``ray_version`` for the block, then as it was."""
    done = subprocess.run(
        [sys.executable, "-c", _SAY_VERSION, address, ray_version],
        env=scrubbed(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    before = done.stdout.strip()
    try:
        yield
    finally:
        subprocess.run(
            [sys.executable, "-c", _SAY_VERSION, address, "", before],
            env=scrubbed(), capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip


_SAY_VERSION = textwrap.dedent(
    """
    import json, sys
    import ray._raylet
    from ray._private import ray_constants
    from raytrace_kit._ray_compat import cluster
    try:
        from ray._common.usage import usage_constants
    except ImportError:  # Ray 2.40
        from ray._private.usage import usage_constants
    address, version = sys.argv[1], sys.argv[2]
    key, space = usage_constants.CLUSTER_METADATA_KEY, ray_constants.KV_NAMESPACE_CLUSTER
    for mode in ("disabled", "token"):  # whichever the cluster lets in
        cluster.set_auth_mode(mode)
        try:
            client = ray._raylet.GcsClient(address=address)
            old = client.internal_kv_get(key, namespace=space)
            break
        except Exception:
            continue
    if version:
        print(old.decode())
        meta = json.loads(old)
        meta["ray_version"] = version
        client.internal_kv_put(key, json.dumps(meta).encode(), True, namespace=space)
    else:
        client.internal_kv_put(key, sys.argv[3].encode(), True, namespace=space)
    """
)
