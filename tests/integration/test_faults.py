"""Faults: deleted files, full disks, cut lines, planted links, leaks, odd exceptions, warnings.

Each test attacks one promise of docs/reliability.md and checks what a user relies on: the
events that must still be there, and the results and exceptions of plain Ray.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import RaytraceKitWarning, debuggable, get_logger, local_mode
from tests.helpers import events_of

MOUNT = shutil.which("mount") or "/bin/mount"
UMOUNT = shutil.which("umount") or "/bin/umount"


def run_python(code: str, env: dict[str, str] | None = None, *args: str) -> Any:
    """Run ``code`` in a fresh interpreter (``args`` in its sys.argv); return the outcome."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def event_lines(directory: Path) -> list[bytes]:
    return [
        line
        for f in sorted(directory.glob("events-*.jsonl"))
        for line in f.read_bytes().splitlines()
    ]


@pytest.mark.usefixtures("ray_session")
class TestDeletedFiles:
    """Log cleaners and people delete files under a running job: events go on."""

    @pytest.mark.parametrize("what", ["file", "directory"])
    def test_deleted_while_a_worker_lives(self, what: str) -> None:
        """The worker notices within a second, recreates the file, says so, loses no later event."""

        @debuggable
        @ray.remote
        class Steady:
            def ping(self, i: int) -> int:
                return i

        actor = Steady.remote()
        assert ray.get(actor.ping.remote(0)) == 0
        (start,) = [e for e in events_of(Steady, "call.end") if e["function"].endswith("ping")]
        name = f"events-{start['node_id'][:12]}-{start['pid']}.jsonl"
        path = raytrace_kit.log_dir() / name
        assert path.exists()
        with warnings.catch_warnings():
            # The directory holds this driver's file too (its submission records): its
            # writer notices and says so, on its own schedule; the worker's is the subject.
            warnings.simplefilter("ignore", raytrace_kit.RaytraceKitWarning)
            if what == "file":
                path.unlink()
            else:
                shutil.rmtree(raytrace_kit.log_dir())
            time.sleep(1.2)  # the writer checks its file at most once a second
            assert ray.get(actor.ping.remote(1)) == 1
            raytrace_kit.read_events()  # this driver's records written, with the block's filter
        events = [json.loads(line) for line in path.read_bytes().splitlines()]
        assert events[0]["event"] == "events.reopened"
        assert events[0]["reason"] == "deleted"
        ends = [e for e in events if e["event"] == "call.end"]
        assert [e["status"] for e in ends] == ["ok"]
        ray.kill(actor)


class TestCutLines:
    """A line cut short by a full disk never swallows the next event."""

    def test_file_size_limit_cuts_a_line(self, tmp_path: Path) -> None:
        """RLIMIT_FSIZE cuts a write in the middle; the next event starts on a fresh line."""
        code = f"""
            import os, resource, signal, warnings
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            os.environ["RAYTRACE_LOG_DIR"] = {str(tmp_path)!r}
            warnings.simplefilter("ignore")
            from raytrace_kit import get_logger
            log = get_logger()
            log.info("first", pad="a" * 100)
            size = os.path.getsize(next(p for p in os.scandir({str(tmp_path)!r})))
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 150, resource.RLIM_INFINITY))
            log.info("second", pad="b" * 400)   # cut: only part of it fits
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
            log.info("third", pad="c" * 100)
            print("done")
        """
        done = run_python(code)
        assert done.stdout.strip() == "done", done.stderr
        lines = event_lines(tmp_path)
        assert len(lines) == 3
        assert json.loads(lines[0])["event"] == "first"
        assert lines[1].startswith(b'{"timestamp"')
        with pytest.raises(json.JSONDecodeError):  # the cut line, and only it, is unreadable
            json.loads(lines[1])
        assert json.loads(lines[2])["event"] == "third"
        events = raytrace_kit.read_events(tmp_path)
        assert [e["event"] for e in events] == ["first", "third"]
        assert "instrumentation.error" in done.stderr

    def test_real_full_disk_on_tmpfs(self, tmp_path: Path) -> None:
        """A tiny tmpfs filled up: events fail (one warning), then resume once space is back."""
        mount = tmp_path / "tiny"
        mount.mkdir()
        mounted = subprocess.run(
            [MOUNT, "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
            capture_output=True,
            text=True,
            check=False,
        )
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
        try:
            code = f"""
                import os, warnings
                os.environ["RAYTRACE_LOG_DIR"] = {str(mount / "logs")!r}
                from raytrace_kit import get_logger
                log = get_logger()
                log.info("before")
                filler = os.open({str(mount / "filler")!r}, os.O_WRONLY | os.O_CREAT)
                try:
                    while True:
                        os.write(filler, b"x" * 512)
                except OSError:
                    pass
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    for i in range(20):
                        log.info("while.full", pad="z" * 300)
                os.close(filler)
                os.remove({str(mount / "filler")!r})
                log.info("after")
                print(len(caught))
            """
            done = run_python(code)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "1"  # one warning, not one per event
            names = [e["event"] for e in raytrace_kit.read_events(mount / "logs")]
            assert names[0] == "before"
            assert names[-1] == "after"
        finally:
            subprocess.run([UMOUNT, str(mount)], check=False)


class BadStrError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def fails_badly() -> None:
    raise BadStrError


@pytest.mark.usefixtures("ray_session")
class TestOddExceptions:
    """An exception whose __str__ raises is a failed call, not an interrupted one."""

    def test_same_outcome_and_a_call_end(self) -> None:
        """Plain Ray and the kit raise the same; the kit's call.end names the type."""

        def outcome(fn: Any) -> tuple[str, str]:
            with pytest.raises(Exception) as info:  # noqa: PT011 -- compared below
                ray.get(fn.remote())
            return type(info.value).__name__, type(getattr(info.value, "cause", None)).__name__

        plain = outcome(ray.remote(max_retries=0)(fails_badly))
        kit = outcome(debuggable(ray.remote(max_retries=0)(fails_badly)))
        assert kit == plain
        (end,) = events_of(fails_badly, "call.end")
        assert end["status"] == "error"
        assert end["error_type"] == "BadStrError"
        assert end["error"] == "<BadStrError whose __str__ raised RuntimeError>"


def takes(config: dict[str, Any], tags: set[Any]) -> int:
    return len(config) + len(tags)


@pytest.mark.usefixtures("ray_session")
class TestNoArgumentValuesInEvents:
    """serialization.fail events name positions and types, never argument values."""

    def test_dict_keys_and_set_members_stay_out(self) -> None:
        """A secret dict key and a set member never reach the event file."""
        checked = debuggable(check="always")(ray.remote(takes))
        secret = {"sekretKEY-1234": threading.Lock()}
        with pytest.raises(raytrace_kit.NotSerializableError) as info:
            checked.remote(secret, {threading.Lock()})
        # The caller's own error names the element exactly; the event file never does.
        assert "config['sekretKEY-1234']" in str(info.value)
        text = "\n".join(
            line.decode()
            for line in event_lines(raytrace_kit.log_dir())
            if b"serialization.fail" in line
        )
        assert "sekretKEY" not in text
        (event,) = [
            e
            for e in raytrace_kit.read_events()
            if e["event"] == "serialization.fail" and e["target"] == "the arguments of takes"
        ]
        names = {f["name"] for f in event["failures"]}
        assert names == {"config[<str key #0>]", "tags{<lock #0>}"}


class TestRotation:
    """Event files rotate at a size, keep a number of backups, and read back in order."""

    def test_rotates_and_reads_in_order(self, tmp_path: Path) -> None:
        """2 KB files, 2 backups: the newest events survive, in order, nothing is cut."""
        code = f"""
            import os
            os.environ["RAYTRACE_LOG_DIR"] = {str(tmp_path)!r}
            from raytrace_kit import get_logger
            log = get_logger()
            for i in range(100):
                log.info("tick", i=i)
        """
        done = run_python(
            code, {"RAYTRACE_ROTATION_MAX_BYTES": "2000", "RAYTRACE_ROTATION_BACKUP_COUNT": "2"}
        )
        assert done.returncode == 0, done.stderr
        files = sorted(p.name for p in tmp_path.glob("events-*.jsonl"))
        assert len(files) == 3  # the live file and two backups
        assert all(p.stat().st_size <= 2000 for p in tmp_path.glob("events-*.jsonl"))
        ticks = [e["i"] for e in raytrace_kit.read_events(tmp_path)]
        assert ticks == list(range(ticks[0], 100))  # the newest, in order, none missing
        assert 0 < ticks[0] < 100

    def test_rays_variables_are_honoured(self, tmp_path: Path) -> None:
        """Without the kit's own variables, Ray's RAY_ROTATION_* apply."""
        code = f"""
            import os
            os.environ["RAYTRACE_LOG_DIR"] = {str(tmp_path)!r}
            from raytrace_kit import get_logger
            for i in range(60):
                get_logger().info("tick", i=i)
        """
        env = {"RAY_ROTATION_MAX_BYTES": "3000", "RAY_ROTATION_BACKUP_COUNT": "1"}
        done = run_python(code, env)
        assert done.returncode == 0, done.stderr
        assert len(list(tmp_path.glob("events-*.jsonl"))) == 2


class TestFiles:
    """Planted links are not followed; descriptors are not inherited or leaked."""

    def test_planted_symlink_is_not_followed(self, tmp_path: Path) -> None:
        """A link at the event file's path: the target stays untouched; one warning."""
        victim = tmp_path / "victim.txt"
        victim.write_text("precious\n")
        logs = tmp_path / "logs"
        logs.mkdir()
        os.environ["RAYTRACE_LOG_DIR"] = str(logs)
        try:
            raytrace_kit._process.reset()
            identity = raytrace_kit._process.process_identity()
            name = raytrace_kit._output.paths.event_file_name(identity.node_id, identity.pid)
            (logs / name).symlink_to(victim)
            with pytest.warns(RaytraceKitWarning, match="cannot write the event file"):
                get_logger().info("should.not.land")
        finally:
            del os.environ["RAYTRACE_LOG_DIR"]
            raytrace_kit._process.reset()
        assert victim.read_text() == "precious\n"

    def test_no_descriptor_leak_across_init_shutdown(self) -> None:
        """Three ray.init/ray.shutdown cycles leave at most one event file open."""
        code = """
            import os, ray
            from raytrace_kit import get_logger
            for _ in range(3):
                ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
                get_logger().info("cycle")
                ray.shutdown()
            targets = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    targets.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    pass  # the descriptor listdir itself used
            print(sum("events-" in target for target in targets))
        """
        done = run_python(code)
        assert done.returncode == 0, done.stderr
        assert int(done.stdout.strip().splitlines()[-1]) <= 1


class TestWarningsAsErrors:
    """PYTHONWARNINGS=error does not break the call; a filter naming our warning does."""

    CODE = """
        import os, sys, warnings
        os.environ["RAYTRACE_LOG_DIR"] = "/etc/hostname/not-a-dir"  # mkdir fails, even as root
        import ray
        from raytrace_kit import RaytraceKitWarning, debuggable, local_mode
        if sys.argv[1:] == ["ours"]:
            warnings.filterwarnings("error", category=RaytraceKitWarning)

        @debuggable
        @ray.remote
        def double(x):
            return 2 * x

        with local_mode():
            print("result", ray.get(double.remote(21)))
    """

    def test_blanket_error_filter_keeps_the_call(self) -> None:
        """All warnings as errors: the call still returns its result."""
        done = run_python(self.CODE, {"PYTHONWARNINGS": "error"})
        assert done.returncode == 0, done.stderr
        assert "result 42" in done.stdout
        assert "instrumentation.error" in done.stderr

    def test_filter_naming_our_warning_raises(self) -> None:
        """A filter naming RaytraceKitWarning asked for exactly that: the warning is raised."""
        done = run_python(self.CODE, None, "ours")
        assert done.returncode != 0
        assert "RaytraceKitWarning" in done.stderr
        assert "result 42" not in done.stdout


def test_local_mode_call_with_unwritable_dir_keeps_result(tmp_path: Path) -> None:
    """An unwritable log dir: one warning, the local call's result unchanged."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    os.environ["RAYTRACE_LOG_DIR"] = str(blocker / "logs")
    try:
        raytrace_kit._process.reset()
        with pytest.warns(RaytraceKitWarning), local_mode():
            assert ray.get(debuggable(ray.remote(takes)).remote({}, set())) == 0
    finally:
        del os.environ["RAYTRACE_LOG_DIR"]
        raytrace_kit._process.reset()


@pytest.mark.usefixtures("ray_session")
class TestReviewFindings:
    """Faults found in review: a restarted pinned runner, refs in checked arguments."""

    def test_restarted_pinned_runner_keeps_running_calls(self) -> None:
        """The runner dies mid-call; Ray restarts it and retries: the call still succeeds."""

        def crash_once(marker: str) -> int:
            if not os.path.exists(marker):
                Path(marker).write_text("crashed")
                os._exit(1)  # the runner process dies here
            return os.getpid()

        pinned = debuggable(pin=True)(ray.remote(num_cpus=0.1, max_retries=2)(crash_once))
        marker = str(Path(raytrace_kit.log_dir()) / f"crash-{os.getpid()}-{time.time()}")
        assert isinstance(ray.get(pinned.remote(marker)), int)
        assert isinstance(ray.get(pinned.with_debug(log=False).remote(marker)), int)
        pinned.unpin()

    def test_checked_arguments_may_hold_refs_and_handles(self) -> None:
        """check='always' on refs and actor handles inside arguments: passed as Ray passes them."""

        @ray.remote
        class Box:
            def get(self) -> int:
                return 7

        @debuggable(check="always")
        @ray.remote
        def use(items: list[Any]) -> int:
            ref, box = items
            return int(ray.get(ref)) + int(ray.get(box.get.remote()))

        box = Box.remote()
        assert ray.get(use.remote([ray.put(5), box])) == 12
        ray.kill(box)


def test_local_static_and_class_methods() -> None:
    """In local mode, static and class methods get no instance, as in Ray."""

    class Tools:
        @staticmethod
        def add(a: int, b: int) -> int:
            return a + b

        @classmethod
        def name(cls) -> str:
            return cls.__name__

    with local_mode():
        tools = debuggable(Tools).remote()
        assert ray.get(tools.add.remote(2, 3)) == 5
        assert ray.get(tools.name.remote()) == "Tools"
