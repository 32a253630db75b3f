"""The sampler's stacks of real frames: what the kit's frames leave in them (no Ray started).

Code is compiled under the file names the kit's modules have (the boundary, ``_process.py``,
the launcher), so the frames are real frames of those files, as a tick sees them.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from raytrace_kit._output.samples import SamplesFile
from raytrace_kit._output.tracebacks import KIT_DIR
from raytrace_kit._worker.sampler import Sampler

BOUNDARY = os.path.join(KIT_DIR, "_worker", "boundary.py")
PROCESS = os.path.join(KIT_DIR, "_process.py")
LOGGER = os.path.join(KIT_DIR, "_output", "logger.py")
LAUNCHER = os.path.join(KIT_DIR, "_driver", "launch.py")
USER = "/srv/app/model.py"


def _function(filename: str, name: str, body: str) -> Callable[..., Any]:
    """A function whose frames are of ``filename``: ``body`` calls ``inner()``."""
    namespace: dict[str, Any] = {"sys": sys}
    source = f"def {name}(inner):\n    return {body}\n"
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 -- the test's own code
    return namespace[name]  # type: ignore[no-any-return]


def _here() -> FrameType:
    return sys._getframe(1)  # the frame that called: the innermost a tick would see


def _names(frame: FrameType) -> list[tuple[str, str]]:
    """The stack the sampler keeps of ``frame``, as (file's name, function), outermost first."""
    sampler = Sampler(SamplesFile(None, {}), 100.0)
    stack_id = sampler._stack(frame)
    frames = {v: k for k, v in sampler.out.frames.items()}
    stack = next(s for s, i in sampler.out.stacks.items() if i == stack_id)
    return [(os.path.basename(frames[i][0].co_filename), frames[i][0].co_name) for i in stack]


class TestKitFramesLeftOut:
    """The kit's frames a call's end runs are left out, as the boundary's are; the user's stay."""

    def test_the_kit_code_a_calls_end_runs_is_left_out(self) -> None:
        """The boundary -> _process (memory figures): neither kit frame is in the stack."""
        figures = _function(PROCESS, "memory_figures", "inner()")
        boundary = _function(BOUNDARY, "_end", "inner()")
        names = _names(boundary(functools.partial(figures, _here)))
        assert not [n for n in names if n[0] in {"boundary.py", "_process.py"}], names
        assert names[-1] == (
            "test_sampler_stacks.py",
            "test_the_kit_code_a_calls_end_runs_is_left_out",
        )

    def test_the_kit_code_the_users_code_calls_stays(self) -> None:
        """The user -> the kit's logger: the logger's frame is the user's cost, kept."""
        logger = _function(LOGGER, "info", "inner()")
        user = _function(USER, "train", "inner()")
        names = _names(user(functools.partial(logger, _here)))
        assert names[-2:] == [("model.py", "train"), ("logger.py", "info")], names

    def test_the_call_path_is_left_out_the_users_function_kept(self) -> None:
        """The boundary -> the user: the user's function right under the boundary's caller."""
        user = _function(USER, "crunch", "inner()")
        boundary = _function(BOUNDARY, "_run_sync", "inner()")
        names = _names(boundary(functools.partial(user, _here)))
        assert names[-1] == ("model.py", "crunch"), names
        assert names[-2][0] == "test_sampler_stacks.py"  # the boundary between them is gone

    @pytest.mark.parametrize("through_runpy", [False, True])
    def test_a_driver_stack_starts_at_the_program(self, through_runpy: bool) -> None:
        """The launcher of raytrace-kit run, runpy under it, every frame outside: left out."""
        program = _function(USER, "main", "inner()")
        stdlib = os.path.dirname(os.__file__)
        runpy = _function(os.path.join(stdlib, "runpy.py"), "_run_code", "inner()")
        launcher = _function(LAUNCHER, "_run_script", "inner()")
        leaf = functools.partial(program, _here)
        names = _names(launcher(functools.partial(runpy, leaf) if through_runpy else leaf))
        assert names == [("model.py", "main")]


def test_the_kits_threads_are_not_sampled_whichever_their_separator() -> None:
    """``raytrace_kit-sampler`` and the driver's ``raytrace-kit-store``: skipped; others kept."""
    import threading  # noqa: PLC0415

    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, name=name, daemon=True)
               for name in ("raytrace-kit-store", "raytrace_kit-watch", "loader")]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        sampler = Sampler(SamplesFile(None, {}), 100.0)
        sampler._threads()
        skipped = [t.name for t in threads if t.ident in sampler.skip]
        assert skipped == ["raytrace-kit-store", "raytrace_kit-watch"]
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_a_kit_thread_started_between_looks_is_not_sampled() -> None:
    """A kit thread newer than the sampler's list of names: skipped at its first tick too."""
    import threading  # noqa: PLC0415

    sampler = Sampler(SamplesFile(None, {}), 100.0)
    sampler._threads()  # the names as of the last flush: the new threads are not in them
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, name=name, daemon=True)
               for name in ("raytrace_kit-watch", "loader")]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        sampler.tick()
        sampled = {ident for ident in sampler.out.threads}
        assert threads[0].ident not in sampled
        assert threads[1].ident in sampled  # the user's new thread is
    finally:
        stop.set()
        for thread in threads:
            thread.join()
