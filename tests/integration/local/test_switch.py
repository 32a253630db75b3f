"""Switching local mode on and off, and its edge: strict mode, warnings, what needs a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import traceback
import warnings
from importlib.metadata import entry_points

import pytest
import ray

from raytrace_kit import (
    LocalModeError,
    RaytraceKitWarning,
    debuggable,
    is_local_mode,
    local_mode,
    set_local_mode,
)


@debuggable
@ray.remote
def asks_the_cluster() -> str:
    return str(ray.get_runtime_context().gcs_address)


@ray.remote
def plain_square(x: int) -> int:
    return x * x


class TestToggles:
    """How local mode is switched on and off."""

    def test_block_nests_and_restores_on_exceptions(self) -> None:
        """Nested blocks restore the previous state, also when the block raises."""
        assert not is_local_mode()
        with local_mode():
            assert is_local_mode()
            with local_mode(enabled=False):
                assert not is_local_mode()
            with pytest.raises(RuntimeError), local_mode(enabled=False):
                raise RuntimeError
            assert is_local_mode()
        assert not is_local_mode()

    def test_set_local_mode(self) -> None:
        """set_local_mode toggles the process-wide setting; blocks override it."""
        set_local_mode(True)
        try:
            assert is_local_mode()
            with local_mode(enabled=False):
                assert not is_local_mode()
        finally:
            set_local_mode(False)
        assert not is_local_mode()
        with pytest.raises(TypeError, match="True or False"):
            set_local_mode("yes")  # type: ignore[arg-type]

    def test_blocks_in_threads_do_not_leak(self) -> None:
        """Concurrent blocks in 8 threads each see their own setting; none leaks."""
        errors: list[str] = []
        barrier = threading.Barrier(8)

        def worker(i: int) -> None:
            enabled = i % 2 == 0
            with local_mode(enabled=enabled):
                barrier.wait()
                for _ in range(200):
                    if is_local_mode() != enabled:
                        errors.append(f"thread {i}")
                barrier.wait()
            if is_local_mode():
                errors.append(f"thread {i} after")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert not is_local_mode()

    @pytest.mark.usefixtures("no_ray")
    def test_local_true_option_runs_locally_without_a_block(self) -> None:
        """@debuggable(local=True) always runs in this process."""

        @debuggable(local=True)
        @ray.remote
        def always_here() -> int:
            return os.getpid()

        assert ray.get(always_here.remote()) == os.getpid()
        assert not ray.is_initialized()

    def test_environment_variable_at_import(self) -> None:
        """RAYTRACE_LOCAL_MODE=1 turns local mode on when raytrace_kit is imported."""
        script = "import raytrace_kit as rk, ray; print(rk.is_local_mode(), ray.is_initialized())"
        env = {**os.environ, "RAYTRACE_LOCAL_MODE": "1"}
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
        )
        assert out.stdout.split() == ["True", "False"]

    def test_pytest_plugin_fixture(self, ray_local: None) -> None:
        """The ray_local fixture (pytest11 entry point) turns local mode on for a test."""
        assert is_local_mode()
        names = {ep.value for ep in entry_points(group="pytest11")}
        assert "raytrace_kit.testing" in names


@pytest.mark.usefixtures("no_ray")
class TestStrictMode:
    """Strict local mode starts no cluster: what would need one raises, naming local mode."""

    def test_strict_mode_refuses_plain_calls_and_starts_nothing(self) -> None:
        """local_mode(strict=True): a plain @ray.remote call raises, naming the function."""
        with local_mode(strict=True), pytest.raises(LocalModeError) as raised:
            plain_square.remote(3)
        message = str(raised.value)
        assert "plain_square" in message
        assert "@debuggable" in message
        assert "Ray is not initialized, so this would start a cluster" in message
        assert not ray.is_initialized()

    def test_ray_local_fixture_is_strict(self, ray_local: None) -> None:
        """The pytest fixture turns plain calls into errors."""
        with pytest.raises(LocalModeError, match="plain_square"):
            plain_square.remote(2)
        assert not ray.is_initialized()

    def test_what_needs_a_cluster_raises_naming_local_mode(self) -> None:
        """The GCS address cannot be had without a cluster: an error, and none is started."""
        with local_mode(strict=True):
            ref = asks_the_cluster.remote()
            with pytest.raises(LocalModeError, match="local mode"):
                ray.get(ref)
        assert not ray.is_initialized()

    def test_kill_of_a_non_actor_starts_no_cluster(self) -> None:
        """Ray's ValueError, without starting a cluster to give it."""
        with local_mode(strict=True), pytest.raises(ValueError, match="only supported for actors"):
            ray.kill(3)
        assert not ray.is_initialized()

    def test_local_traceback_starts_in_user_code(self) -> None:
        """ray.get's traceback holds the user's frames, not the kit's."""
        with local_mode(strict=True):
            ref = asks_the_cluster.remote()
            with pytest.raises(LocalModeError) as raised:
                ray.get(ref)
        frames = traceback.extract_tb(raised.value.__traceback__)
        kit = [f for f in frames if "/raytrace_kit/_local/" in f.filename]
        assert [f.name for f in frames if f.filename == __file__][-1] == "asks_the_cluster"
        assert all(f.name not in {"execute_call", "_call_into"} for f in kit)


@pytest.mark.usefixtures("ray_session")
def test_plain_call_warns_once_and_runs_on_ray() -> None:
    """Not strict: a plain call warns once per function, naming it, and runs on Ray."""
    with warnings.catch_warnings(record=True) as caught, local_mode():
        warnings.simplefilter("always")
        results = ray.get([plain_square.remote(3), plain_square.remote(4)])
    assert results == [9, 16]
    ours = [w for w in caught if issubclass(w.category, RaytraceKitWarning)]
    assert len(ours) == 1
    assert "plain_square" in str(ours[0].message)
    assert "@debuggable" in str(ours[0].message)
    assert ours[0].filename == __file__  # points at the user's call
