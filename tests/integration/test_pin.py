"""Tests for pinning, live stacks and debugger helpers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import ray

import raytrace_kit
from raytrace_kit import (
    InvalidOptionError,
    Pin,
    RaytraceKitWarning,
    attach_debugger,
    debuggable,
    stacks,
)
from tests.helpers import events_of, listening_sockets, wait_for_start

pytestmark = pytest.mark.usefixtures("ray_session")

# Pinned runners hold their resources for the life of the job: keep them small here.
SMALL = {"num_cpus": 0.1}


class TestPinnedFunction:
    """pin=True: every call runs in one dedicated process, with Ray's semantics."""

    def test_twenty_calls_one_process_and_where_it_is(self) -> None:
        """20 calls run in one pid, which pinned_worker() reports; events say 'pinned'."""

        @debuggable(pin=True)
        @ray.remote(**SMALL)
        def whoami(i: int) -> tuple[int, str, int]:
            return os.getpid(), ray.get_runtime_context().get_node_id(), i

        results = ray.get([whoami.remote(i) for i in range(20)])
        assert [i for _, _, i in results] == list(range(20))  # in submission order
        assert len({pid for pid, _, _ in results}) == 1
        worker = whoami.pinned_worker()
        assert (worker.pid, worker.node_id) == results[0][:2]
        ends = events_of(whoami, "call.end")
        assert len(ends) == 20
        assert {e["mode"] for e in ends} == {"pinned"}
        assert {e["actor_id"] for e in ends} == {worker.actor_id}
        assert {e["worker_id"] for e in ends} == {worker.worker_id}
        whoami.unpin()

    def test_unpinned_calls_spread_over_workers(self) -> None:
        """The same function unpinned uses several workers when several are free."""

        @debuggable(pin=True)
        @ray.remote(num_cpus=0.5)
        def slow_pid() -> int:
            time.sleep(0.6)
            return os.getpid()

        spread = ray.get([slow_pid.with_debug(pin=False).remote() for _ in range(4)])
        assert len(set(spread)) >= 2
        assert {e["mode"] for e in events_of(slow_pid, "call.end")} == {"ray"}

    def test_semantics_num_returns_errors_generators_retries(self, tmp_path: Path) -> None:
        """num_returns, exceptions at ray.get, generators and retries behave as for tasks."""

        @debuggable(pin=True)
        @ray.remote(num_returns=2, **SMALL)
        def pair(x: int) -> tuple[int, int]:
            return x, -x

        assert ray.get(pair.remote(3)) == [3, -3]

        @debuggable(pin=True)
        @ray.remote(**SMALL)
        def fails() -> None:
            raise KeyError("pinned failure")

        with pytest.raises(KeyError, match="pinned failure") as info:
            ray.get(fails.remote())
        assert isinstance(info.value, ray.exceptions.RayTaskError)

        @debuggable(pin=True)
        @ray.remote(**SMALL)
        def count(n: int):
            for i in range(n):  # noqa: UP028 -- Ray sends into generators
                yield i

        assert [ray.get(r) for r in count.remote(3)] == [0, 1, 2]

        marker = tmp_path / "attempted"

        @debuggable(pin=True)
        @ray.remote(max_retries=1, retry_exceptions=True, **SMALL)
        def second_time(path: str) -> str:
            if not os.path.exists(path):
                Path(path).touch()
                raise ValueError("first attempt")
            return "ok"

        assert ray.get(second_time.remote(str(marker))) == "ok"
        assert [e["attempt"] for e in events_of(second_time, "call.end")] == [0, 1]
        for f in (pair, fails, count, second_time):
            f.unpin()

    def test_unpin_ends_the_process(self) -> None:
        """unpin() ends the pinned process; the next call starts a new one."""

        @debuggable(pin=True)
        @ray.remote(**SMALL)
        def pid() -> int:
            return os.getpid()

        first = ray.get(pid.remote())
        pid.unpin()
        second = ray.get(pid.remote())
        assert first != second
        pid.unpin()

    def test_stacks_of_a_call_blocked_in_sleep(self) -> None:
        """f.stacks() shows the frame of a call that is sleeping right now."""

        @debuggable(pin=True)
        @ray.remote(**SMALL)
        def stuck(seconds: float) -> str:
            time.sleep(seconds)
            return "woke"

        ref = stuck.remote(3)
        wait_for_start(stuck, "stuck")
        dump = stuck.stacks()
        thread = dump.find("stuck")
        assert thread is not None
        assert thread.functions()[-1] == "stuck"
        assert "time.sleep(seconds)" in str(dump)
        assert ray.get(ref) == "woke"
        stuck.unpin()

    def test_misuse(self) -> None:
        """Helpers of pinned functions on unpinned ones, bad ids, pin=True on a class."""
        unpinned = debuggable(ray.remote(lambda: 1))
        with pytest.raises(InvalidOptionError, match=r"pin=True"):
            unpinned.stacks()
        with pytest.raises(InvalidOptionError, match="56 hex digits"):
            debuggable(pin="node-7")
        with pytest.raises(InvalidOptionError, match="already runs all its calls"):

            @debuggable(pin=True)
            class Holder:
                pass

        with pytest.raises(raytrace_kit.NodeNotFoundError, match="does not exist"):
            debuggable(pin=Pin(node_id="ab" * 28))(ray.remote(lambda: 1)).remote()


class TestActorStacks:
    """stacks(handle) answers while the actor is busy, and leaves call order unchanged."""

    def test_blocked_in_event_wait(self) -> None:
        """A call blocked in Event.wait shows in the stacks; the actor then goes on."""

        @debuggable
        @ray.remote
        class Gate:
            def __init__(self) -> None:
                self.event = threading.Event()

            def block(self) -> str:
                self.event.wait(timeout=30)
                return "released"

        gate = Gate.remote()
        ref = gate.block.remote()
        wait_for_start(Gate, ".block")
        dump = stacks(gate)
        thread = dump.find("block")
        assert thread is not None
        assert "wait" in thread.functions()
        ray.kill(gate)
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(ref)

    def test_async_actor_stacks_while_busy(self) -> None:
        """An async actor answers too, while its default loop is blocked."""

        @debuggable
        @ray.remote
        class AsyncWorker:
            async def hog(self) -> int:
                time.sleep(3)  # blocks its event loop on purpose
                return 1

            async def ping(self) -> int:
                await asyncio.sleep(0)
                return 2

        worker = AsyncWorker.remote()
        ray.get(worker.ping.remote())
        ref = worker.hog.remote()
        wait_for_start(AsyncWorker, ".hog")
        dump = stacks(worker, timeout=10)
        assert dump.find("hog") is not None
        assert ray.get(ref) == 1
        ray.kill(worker)

    def test_method_order_unchanged(self) -> None:
        """300 calls of a debuggable actor run in submission order, as without the kit."""

        @debuggable
        @ray.remote
        class Recorder:
            def __init__(self) -> None:
                self.seen: list[int] = []

            def record(self, i: int) -> None:
                self.seen.append(i)

            def result(self) -> list[int]:
                return self.seen

        recorder = Recorder.remote()
        for i in range(300):
            recorder.record.remote(i)
        assert ray.get(recorder.result.remote()) == list(range(300))
        ray.kill(recorder)

    def test_plain_actor_has_no_stacks(self) -> None:
        """stacks() of a non-debuggable actor says what is needed."""

        @ray.remote
        class Plain:
            pass

        plain = Plain.remote()
        with pytest.raises(TypeError, match="@debuggable class"):
            stacks(plain)
        ray.kill(plain)


class TestDebuggers:
    """attach_debugger() fails soft, binds loopback, and warns loudly otherwise."""

    def test_missing_pycharm_warns_and_continues(self) -> None:
        """No pydevd-pycharm installed: a warning and an event, and the code goes on."""
        with pytest.warns(RaytraceKitWarning, match="pip install pydevd-pycharm"):
            assert attach_debugger("pycharm") is None
        events = [e for e in raytrace_kit.read_events() if e["event"] == "debugger.unavailable"]
        assert events[-1]["debugger"] == "pycharm"

    def test_debugpy_listens_on_loopback(self) -> None:
        """Debugpy listens on 127.0.0.1 by default (in a subprocess: it listens once)."""
        script = textwrap.dedent(
            """
            import os, raytrace_kit as rk
            endpoint = rk.attach_debugger("debugpy", port=0)
            print(endpoint.host, endpoint.port, endpoint.pid == os.getpid())
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
        )
        host, port, same_pid = out.stdout.split()
        assert host == "127.0.0.1"
        assert int(port) > 0
        assert same_pid == "True"

    def test_non_loopback_warns_loudly_and_fails_soft(self) -> None:
        """A non-loopback host prints the unauthenticated-port warning; bind failure is soft."""
        script = textwrap.dedent(
            """
            import warnings, raytrace_kit as rk
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                # 192.0.2.123 (TEST-NET) is not an address of this machine: the bind fails.
                endpoint = rk.attach_debugger("debugpy", host="192.0.2.123", port=0)
            print("ENDPOINT", endpoint)
            print("WARNINGS", len(caught))
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
        )
        assert "UNAUTHENTICATED" in out.stderr
        assert "ENDPOINT None" in out.stdout
        assert "WARNINGS 2" in out.stdout  # the loud one, and the soft failure

    def test_no_socket_left_listening_without_a_debugger(self) -> None:
        """Using the kit opens no listening socket in the driver unless asked."""

        @debuggable(profile="cprofile")
        @ray.remote
        def work(x: int) -> int:
            return x

        before = listening_sockets(os.getpid())
        ray.get([work.remote(i) for i in range(5)])
        with raytrace_kit.local_mode():
            ray.get(work.remote(1))
        with raytrace_kit.profile_cpu():
            ray.get(work.remote(2))
        assert listening_sockets(os.getpid()) == before


def stacks_until_it_fails(actor: object) -> None:
    """Ask for stacks until the (killed) actor's death is known, for 10 s at most."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stacks(actor, timeout=5)
        time.sleep(0.2)


class TestStacksWithoutTouchingTheActor:
    """stacks() reads an actor blocked in C code, names the running call, hides Ray's frames."""

    @pytest.mark.parametrize("blocker", ["sleep", "lock"])
    def test_blocked_in_c_code(self, blocker: str) -> None:
        """time.sleep and lock.acquire release the GIL: the kit's server thread answers."""

        @debuggable
        @ray.remote
        class Blocked:
            def __init__(self) -> None:
                self.lock = threading.Lock()
                self.lock.acquire()

            def wait_here(self, how: str) -> str:
                if how == "sleep":
                    time.sleep(4)
                else:
                    self.lock.acquire(timeout=4)
                return threading.current_thread().name

        actor = Blocked.remote()
        ref = actor.wait_here.remote(blocker)
        wait_for_start(Blocked, ".wait_here")
        dump = stacks(actor, timeout=20)
        thread = dump.find("wait_here")
        assert thread is not None
        assert thread.name == "MainThread"
        assert thread.functions()[-1] == "wait_here"
        source = "time.sleep(4)" if blocker == "sleep" else "self.lock.acquire(timeout=4)"
        assert source in str(dump)
        (call,) = thread.calls
        start = [e for e in events_of(Blocked, "call.start") if e["function"].endswith("wait_here")]
        assert call.call_id == start[-1]["call_id"]
        assert call.task_id == start[-1]["task_id"]
        assert call.function.endswith("Blocked.wait_here")
        assert 0 < call.running_s < 20
        assert f"running {call.function}" in str(dump)
        assert "raytrace_kit-stacks" not in {t.name for t in dump.threads}
        assert ray.get(ref) == "MainThread"  # the call went on, on the main thread
        ray.kill(actor)

    def test_user_frames_by_default_all_frames_on_request(self) -> None:
        """Ray's and the kit's frames are hidden unless all_frames=True."""

        @debuggable
        @ray.remote
        class Sleeper:
            def __init__(self) -> None:
                # A thread of Python's own frames only, as Ray's own threads are: Ray 2.60
                # runs a GC thread in every worker, Ray 2.40 none.
                self.idle = threading.Event()
                threading.Thread(target=self.idle.wait, daemon=True).start()

            def nap(self) -> None:
                time.sleep(3)

        actor = Sleeper.remote()
        ref = actor.nap.remote()
        wait_for_start(Sleeper, ".nap")
        short = stacks(actor).find("nap")
        full = stacks(actor, all_frames=True).find("nap")
        assert short is not None
        assert full is not None
        ray_dir = str(Path(ray.__file__).parent)
        kit_dir = str(Path(raytrace_kit.__file__).parent)
        assert not [f for f in short.frames if f[0].startswith((ray_dir, kit_dir))]
        assert short.hidden > 0
        assert [f for f in full.frames if f[0].startswith(ray_dir)]
        assert [f for f in full.frames if f[0].startswith(kit_dir)]
        # Ray's own threads (GC, logs...) are counted, not listed, unless all are asked for.
        brief, every = stacks(actor), stacks(actor, all_frames=True)
        assert brief.hidden_threads > 0
        assert len(every.threads) == len(brief.threads) + brief.hidden_threads
        assert [t.name for t in brief.threads] == ["MainThread"]
        ray.get(ref)
        ray.kill(actor)

    def test_no_network_port_in_the_actor(self) -> None:
        """The stacks server listens on a FIFO in the log dir, never on a socket."""

        @debuggable
        @ray.remote
        class Quiet:
            def pid(self) -> int:
                return os.getpid()

        actor = Quiet.remote()
        pid = ray.get(actor.pid.remote())
        before = listening_sockets(pid)
        stacks(actor)
        assert listening_sockets(pid) == before
        fifos = list((raytrace_kit.log_dir() / "stacks").glob(f"*-{pid}.fifo"))
        assert len(fifos) == 1
        assert oct(fifos[0].stat().st_mode & 0o777) == "0o600"
        ray.kill(actor)

    def test_stacks_of_a_dead_actor(self) -> None:
        """A killed actor has no stacks: the error says so."""

        @debuggable
        @ray.remote
        class Short:
            def ping(self) -> int:
                return 1

        actor = Short.remote()
        ray.get(actor.ping.remote())
        ray.kill(actor)
        with pytest.raises(raytrace_kit.InvalidTargetError, match=r"is dead|serves no stacks"):
            stacks_until_it_fails(actor)


class TestOneRunnerEverywhere:
    """A pinned function called from tasks (a pickled copy) still runs in its one process."""

    def test_calls_from_tasks_share_the_runner(self) -> None:
        """The driver's calls and those made inside two tasks run in the same pid."""

        @debuggable(pin=True)
        @ray.remote(**SMALL)
        def where_am_i() -> int:
            return os.getpid()

        @ray.remote(num_cpus=0.1)
        def calls_it() -> int:
            return int(ray.get(where_am_i.remote()))

        here = ray.get(where_am_i.remote())
        assert ray.get([calls_it.remote(), calls_it.remote()]) == [here, here]
        assert where_am_i.pinned_worker().pid == here
        where_am_i.unpin()
