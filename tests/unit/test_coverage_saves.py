"""Unit tier: how the driver asks the workers for a save, and how they answer (no Ray)."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import coverage
import pytest
import ray
import ray._private.function_manager as manager

from raytrace_kit._driver import coverage as driver_coverage
from raytrace_kit._worker import coverage as worker_coverage


class TestRendezvous:
    """Requests are numbered; each worker's answer is the last number it saved for."""

    def test_requests_count_up_and_answers_are_read_by_worker(self, tmp_path: Path) -> None:
        assert worker_coverage.request_flush(tmp_path) == 1
        assert worker_coverage.request_flush(tmp_path) == 2
        worker_coverage.ack_path(tmp_path, "host-a", 12).write_text("2")
        worker_coverage.ack_path(tmp_path, "host.b", 7).write_text("0")
        assert worker_coverage.read_acks(tmp_path) == {("host-a", 12): 2, ("host.b", 7): 0}

    def test_a_worker_that_ended_is_not_waited_for(self, tmp_path: Path) -> None:
        ended = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        run = driver_coverage.CoverageRun.__new__(driver_coverage.CoverageRun)
        run.rendezvous = tmp_path
        host = socket.gethostname()
        worker_coverage.ack_path(tmp_path, host, int(ended.stdout)).write_text("0")
        assert run.flush(deadline=60) == 0  # returned at once: the only worker is gone

    def test_a_live_worker_is_waited_for_until_it_answers(self, tmp_path: Path) -> None:
        run = driver_coverage.CoverageRun.__new__(driver_coverage.CoverageRun)
        run.rendezvous = tmp_path
        host = socket.gethostname()
        ack = worker_coverage.ack_path(tmp_path, host, os.getpid())  # this process: alive
        ack.write_text("0")
        answered = threading.Event()

        def answer() -> None:  # a worker's saver: sees request 1, saves, answers
            request = worker_coverage.request_path(tmp_path)
            while not request.exists():
                answered.wait(0.01)
            ack.write_text(request.read_text())
            answered.set()

        threading.Thread(target=answer).start()
        assert run.flush(deadline=60) == 1
        assert answered.is_set()


class TestSettings:
    """The settings handed to workers are the user's, made to work from any directory."""

    def test_workers_get_absolute_paths_parallel_files_and_the_plugin(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "src").mkdir()
        cov = coverage.Coverage(
            source=["src", "mypkg"], branch=True, omit=["build/*", "*/tests/*"], config_file=False
        )
        run = driver_coverage.CoverageRun(cov)
        try:
            config = coverage.config.CoverageConfig.deserialize(run.setting)
        finally:
            run.stop()
        assert config.parallel is True
        assert config.branch is True
        assert config.data_file == str(tmp_path / ".coverage")
        assert config.source == [str(tmp_path / "src"), "mypkg"]  # a directory, a package
        assert config.run_omit == [str(tmp_path / "build/*"), "*/tests/*"]
        assert worker_coverage.PLUGIN in config.plugins
        options = config.plugin_options[worker_coverage.PLUGIN]
        assert options["run"] == run.run
        assert Path(options["rendezvous"]) == run.rendezvous


class TestActorMethodExecutor:
    """In workers, Ray's actor method executor is the kit's: it must read as Ray's own."""

    def test_an_error_in_a_method_reads_exactly_as_through_rays_executor(self) -> None:
        class Parser:
            def parse(self, text: str) -> int:
                return int(text)

        def text_of(executor: object) -> list[str]:
            try:
                executor(Parser(), "x")  # type: ignore[operator]
            except ValueError:
                lines = traceback.format_exc().splitlines()
            first = next(i for i, line in enumerate(lines) if "function_manager.py" in line)
            return lines[first:]

        make = manager.FunctionActorManager._make_actor_method_executor
        # Ray 2.40 passes actor_imported too (gone by 2.44), as a keyword.
        extra = (
            {"actor_imported": True}
            if "actor_imported" in inspect.signature(make).parameters
            else {}
        )
        rays = make(None, "parse", Parser.parse, **extra)
        worker_coverage._trace_actor_threads(ray)  # as in a worker, once Ray is imported
        assert manager.FunctionActorManager._make_actor_method_executor is not make
        ours = manager.FunctionActorManager._make_actor_method_executor(
            None, "parse", Parser.parse, **extra
        )
        assert ours.__code__ is not rays.__code__
        assert (ours.name, ours.method) == ("parse", Parser.parse)
        assert text_of(ours) == text_of(rays)
        assert any("int(text)" in line for line in text_of(ours))
