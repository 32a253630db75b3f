"""Coverage in the processes Ray starts: saved every second, on request, and on ``os._exit``.

coverage.py loads this module as a plugin (``[run] plugins``) in every process started
with the settings that ``raytrace_kit.coverage()`` and ``pytest --ray-cov`` hand to the
processes Ray starts (``COVERAGE_PROCESS_CONFIG``, read by coverage's own ``.pth`` file at
interpreter start-up). What plain start-up coverage lacks, and this adds:

- **Saves that outlive the worker.** Ray ends workers without running ``atexit``
  (``ray.kill``, ``ray.shutdown()``, the OOM killer's SIGKILL), so a thread saves the data
  file every second when something ran, at once when the driver asks (see
  :func:`request_flush`), and ``os._exit`` saves first.
- **Ray's own threads traced.** A threaded actor's methods (``max_concurrency > 1``,
  concurrency groups) run on threads Ray's C++ core starts, which ``threading.settrace``
  never reaches: each actor method call installs coverage's tracer in its thread first.

Imported at every interpreter start-up of the run's processes: it imports no Ray and
nothing heavy until Ray itself is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from raytrace_kit import _registry

__all__ = [
    "PLUGIN",
    "ack_path",
    "active_run",
    "coverage_init",
    "read_acks",
    "request_flush",
    "request_path",
    "trace_this_thread",
]

PLUGIN = __name__  # the module coverage.py loads, named in [run] plugins
_TICK = 0.1  # seconds between looks at the driver's request
_EXIT = os._exit  # the real one: saving first must never change how a worker ends


class _State:
    """This process's coverage helper: its settings, its saver thread, its lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one save at a time: the thread, os._exit, atexit
        self.stop = threading.Event()
        self.clear()

    def clear(self) -> None:
        """Stop the saver thread (at its next tick) and forget the settings."""
        self.stop.set()
        self.stop = threading.Event()  # the next saver's; the old thread keeps its own
        self.run: str | None = None  # the run whose settings started coverage here
        self.rendezvous: Path | None = None
        self.interval = 1.0
        self.saver: threading.Thread | None = None


state = _State()
_registry.register(state.clear, layer=_registry.WORKER)


def coverage_init(reg: Any, options: dict[str, str]) -> None:
    """coverage.py's plugin entry: start the saver and the thread tracing in this process.

    Args:
        reg: coverage.py's plugin registry (nothing is registered with it).
        options: ``run`` (the run's id), ``rendezvous`` (the directory where the driver
            asks for saves and workers answer), ``interval`` (seconds between saves).
    """
    del reg
    if state.saver is not None:
        return  # coverage started twice in one process (its .pth seen twice)
    state.run = options.get("run")
    state.rendezvous = Path(options["rendezvous"]) if options.get("rendezvous") else None
    state.interval = float(options.get("interval", "1.0"))
    state.saver = threading.Thread(
        target=_save_loop, args=(state.stop,), name="raytrace_kit-coverage", daemon=True
    )
    state.saver.start()
    _when_imported("ray", _trace_actor_threads)
    os._exit = _exit_after_saving  # type: ignore[assignment]


def active_run() -> str | None:
    """The id of the coverage run measuring this process (None: none of the kit's).

    The driver runs it as a task to check that the cluster's workers are measured.
    """
    return state.run


def trace_this_thread() -> bool:
    """Install coverage's tracer in this thread, if coverage traces threads and it has none.

    ``threading.gettrace()`` is what ``threading.Thread`` installs in each thread it starts
    (coverage's installer, which puts its tracer in place at the next call); a thread that
    Ray's C++ core started never ran it. With coverage's ``sys.monitoring`` core (Python
    3.12+) there is nothing to do: it sees every thread.
    """
    installer = threading.gettrace()
    if installer is not None and sys.gettrace() is None:
        sys.settrace(installer)
    return False  # see _RaysExecutor: called first in a condition


def request_path(rendezvous: Path) -> Path:
    """The file the driver writes to ask every worker for a save (its content: a number)."""
    return rendezvous / "request"


def ack_path(rendezvous: Path, host: str, pid: int) -> Path:
    """The file a worker writes when it has saved (its content: the request it answered)."""
    return rendezvous / f"{host}-{pid}.ack"


def request_flush(rendezvous: Path) -> int:
    """Ask every worker of the run to save now; returns the request's number."""
    path = request_path(rendezvous)
    try:
        number = int(path.read_text() or 0) + 1
    except (OSError, ValueError):
        number = 1
    _write_atomic(path, str(number))
    return number


def read_acks(rendezvous: Path) -> dict[tuple[str, int], int]:
    """Each worker's last answered request, by (host, pid); 0 until it answered one."""
    acks: dict[tuple[str, int], int] = {}
    for path in rendezvous.glob("*.ack"):
        host, _, pid = path.stem.rpartition("-")
        with contextlib.suppress(OSError, ValueError):
            acks[host, int(pid)] = int(path.read_text() or 0)
    return acks


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that a reader sees the old content or the new, never a part."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    partial.replace(path)


def _current_coverage() -> Any:
    import coverage  # noqa: PLC0415 -- loaded by coverage.py itself: it is there

    return coverage.Coverage.current()


def _save(cov: Any, stop: threading.Event) -> None:
    """Flush what was measured since the last save into this process's data file."""
    with state.lock:
        if not stop.is_set():
            cov.get_data()  # coverage.py flushes its collected lines to the file


def _save_loop(stop: threading.Event) -> None:
    """The saver thread: every second if something ran, and at each request of the driver."""
    cov = None
    for _ in range(600):  # coverage starts right after loading its plugins
        cov = _current_coverage()
        if cov is not None or stop.is_set():
            break
        time.sleep(0.05)
    if cov is None:
        return
    # Registered after coverage's own atexit save, so it runs before it: that last save
    # is then alone.
    atexit.register(_stop, stop)
    answered, ack = _answered(), None
    if state.rendezvous is not None:
        ack = ack_path(state.rendezvous, socket.gethostname(), os.getpid())
        with contextlib.suppress(OSError):
            _write_atomic(ack, str(answered))  # known to the driver from now on
    last = time.monotonic()
    while not stop.wait(_TICK):
        wanted = _answered()
        if wanted > answered or time.monotonic() - last >= state.interval:
            try:
                _save(cov, stop)
            except Exception as exc:  # never break the user's program; say it once
                _report(exc)
            last = time.monotonic()
        if wanted > answered and ack is not None:
            with contextlib.suppress(OSError):
                _write_atomic(ack, str(wanted))
            answered = wanted


def _answered() -> int:
    """The driver's latest request (0: none)."""
    if state.rendezvous is None:
        return 0
    try:
        return int(request_path(state.rendezvous).read_text() or 0)
    except (OSError, ValueError):
        return 0


def _report(exc: BaseException) -> None:
    from raytrace_kit._output import writer  # noqa: PLC0415 -- only on failure

    writer.report_failure("coverage-save", "coverage data could not be saved", exc)


def _stop(stop: threading.Event) -> None:
    with state.lock:
        stop.set()


def _exit_after_saving(status: int) -> None:
    """``os._exit`` that saves coverage first (a task may end its worker this way)."""
    with contextlib.suppress(Exception):
        cov = _current_coverage()
        if cov is not None:
            _save(cov, state.stop)
    _EXIT(status)


def _trace_actor_threads(ray: ModuleType) -> None:
    """Once Ray is imported: each actor method call installs coverage's tracer first."""
    del ray
    from raytrace_kit import _ray_compat  # noqa: PLC0415 -- Ray is imported now

    _RaysExecutor.rays = _ray_compat.replace_actor_executors(_RaysExecutor.make)


class _RaysExecutor:
    """Ray 2.60's actor method executor, line for line, that calls trace_this_thread() first.

    Not a wrapper around Ray's: a wrapper is one more frame in every remote traceback. Its
    code even carries the file name and first line of Ray's (when their lines match one for
    one, and at the same columns: the nesting here is Ray's), so a remote traceback reads
    exactly as plain Ray prints it.
    """

    rays: CodeType | None = None  # the code of Ray's own executor

    @staticmethod
    def make(method_name: str, method: Any, is_class_method: Any, is_static_method: Any) -> Any:
        # Ray's layout, line for line (not the formatter's):
        # fmt: off
        def actor_method_executor(__ray_actor: Any, *args: Any, **kwargs: Any) -> Any:
            # Execute the assigned method (after the tracer is in place).
            is_bound = trace_this_thread() or is_class_method(method) or is_static_method(
                type(__ray_actor), method_name
            )
            if is_bound:
                return method(*args, **kwargs)
            else:  # Ray's lines, one for one
                return method(__ray_actor, *args, **kwargs)
        # fmt: on

        ours, rays = actor_method_executor.__code__, _RaysExecutor.rays
        if rays is not None and _relative_lines(ours) == _relative_lines(rays):
            actor_method_executor.__code__ = ours.replace(
                co_filename=rays.co_filename, co_firstlineno=rays.co_firstlineno
            )
        actor_method_executor.name = method_name  # type: ignore[attr-defined]
        actor_method_executor.method = method  # type: ignore[attr-defined]
        return actor_method_executor


def _relative_lines(code: CodeType) -> list[int]:
    """The lines ``code`` runs, counted from its first line."""
    return sorted({line - code.co_firstlineno for *_, line in code.co_lines() if line is not None})


class _AfterImport(importlib.abc.MetaPathFinder):
    """Run ``then(module)`` once ``name`` has been imported (a one-shot import hook)."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, then = spec.loader, self.then

        def exec_module(module: ModuleType) -> None:
            type(loader).exec_module(loader, module)
            try:
                then(module)
            except Exception as exc:  # never break the import
                _report(exc)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _when_imported(name: str, then: Callable[[ModuleType], None]) -> None:
    """``then(module)`` now if ``name`` is imported, else right after its import."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))
