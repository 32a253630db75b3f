"""coverage(): the lines and branches run in Ray's workers, measured with the user's settings.

The driver hands coverage.py's own settings (those of the coverage measuring this process,
pytest-cov's included, else the user's configuration file) to every process Ray starts,
through ``COVERAGE_PROCESS_CONFIG``: coverage's ``.pth`` file starts coverage at each
worker's start-up, and ``_worker/coverage.py`` (a coverage plugin) saves what it measured
every second and when the driver asks. Each worker writes a data file of its own beside
the data file, named as coverage's parallel mode names them, so ``coverage combine`` and
pytest-cov's combine take them in.

The settings reach the processes of the clusters started while the run is on: the
variable is set around ``ray.init()`` and ``Cluster.add_node()``, whose raylets pass it to
their workers. Before ``ray.shutdown()`` or a node's removal ends the workers, every worker
saves (see :meth:`CoverageRun.flush`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import site
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raytrace_kit import _ray_compat
from raytrace_kit._worker import coverage as worker_coverage
from raytrace_kit.exceptions import CoverageError

__all__ = ["CoverageRun", "coverage", "start_run"]

_VARIABLE = "COVERAGE_PROCESS_CONFIG"  # read by coverage.process_startup() in new processes
_FLUSH_DEADLINE = 30.0  # seconds a flush waits for busy workers (each answers within 0.1 s)
_PROBE_DEADLINE = 120.0  # seconds for one worker to start and say which run measures it


def _coverage_module() -> Any:
    try:
        import coverage  # noqa: PLC0415 -- optional: only when coverage is asked for
    except ImportError:
        msg = (
            "coverage of remote code needs coverage.py, which is not installed: "
            "pip install coverage (or pytest-cov, which brings it)"
        )
        raise CoverageError(msg) from None
    return coverage


def _check_startup_file() -> None:
    """Coverage starts in new processes only through its ``.pth`` file: is it installed?"""
    folders = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for folder in dict.fromkeys(folders):
        with contextlib.suppress(OSError):
            for pth in Path(folder).glob("*.pth"):
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    if "process_startup" in pth.read_text():
                        return
    msg = (
        "coverage.py's start-up file (a .pth file that calls coverage.process_startup) is "
        "not installed for this Python, so Ray's workers cannot start coverage: upgrade "
        "coverage.py (pip install -U 'coverage>=7.10.6') in the environment the workers use"
    )
    raise CoverageError(msg)


def _absolute_patterns(patterns: list[str] | None) -> list[str] | None:
    """File patterns as coverage reads them in the driver's directory, for any directory."""
    if patterns is None:
        return None
    return [
        p if p.startswith(("*", "?")) or os.path.isabs(p) else os.path.abspath(p) for p in patterns
    ]


class CoverageRun:
    """One measurement of remote code: its settings for workers, the hooks, the saves.

    Args:
        cov: the ``coverage.Coverage`` whose settings the workers use (measuring this
            process or not).
    """

    def __init__(self, cov: Any) -> None:
        coverage = _coverage_module()
        _check_startup_file()
        self.run = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.rendezvous = Path(tempfile.mkdtemp(prefix="raytrace_kit-coverage-"))
        config = coverage.config.CoverageConfig.deserialize(cov.config.serialize())
        config.parallel = True  # each process its own data file, named as coverage names them
        config.run_omit = _absolute_patterns(config.run_omit)
        config.run_include = _absolute_patterns(config.run_include)
        config.plugins = [*config.plugins, worker_coverage.PLUGIN]
        config.plugin_options[worker_coverage.PLUGIN] = {
            "run": self.run,
            "rendezvous": str(self.rendezvous),
            "interval": "1.0",
        }
        self.data_file = Path(config.data_file)
        self.setting = config.serialize()
        self.started = False
        self.replaced: list[tuple[Any, str, Any, Any]] = []  # (owner, name, Ray's, ours)
        self.workers = 0  # processes measured, counted when the run stops

    # -- the hooks -------------------------------------------------------------------

    def start(self) -> None:
        """Hand the settings to the clusters started from now on; save before they end."""
        import ray  # noqa: PLC0415 -- only when coverage of remote code is asked for
        import ray.cluster_utils  # noqa: PLC0415

        run, cluster = self, ray.cluster_utils.Cluster
        init, shutdown = ray.init, ray.shutdown
        add_node, remove_node = cluster.add_node, cluster.remove_node

        def coverage_init(*args: Any, **kwargs: Any) -> Any:
            with run.environment():
                context = init(*args, **kwargs)
            run.check_workers(shutdown)
            return context

        def coverage_shutdown(*args: Any, **kwargs: Any) -> Any:
            run.flush()
            return shutdown(*args, **kwargs)

        def coverage_add_node(self: Any, *args: Any, **kwargs: Any) -> Any:
            with run.environment():
                return add_node(self, *args, **kwargs)

        def coverage_remove_node(self: Any, *args: Any, **kwargs: Any) -> Any:
            run.flush()
            return remove_node(self, *args, **kwargs)

        # Set directly, not through _ray_compat.patch: a run lasts the whole test session,
        # and testing.reset() (between tests) must leave it in place.
        self.replaced = [
            (ray, "init", init, coverage_init),
            (ray, "shutdown", shutdown, coverage_shutdown),
            (cluster, "add_node", add_node, coverage_add_node),
            (cluster, "remove_node", remove_node, coverage_remove_node),
        ]
        for owner, name, _, ours in self.replaced:
            setattr(owner, name, ours)
        self.started = True

    def stop(self) -> None:
        """Save every worker's data now, and leave Ray's functions as they were."""
        if not self.started:
            return
        self.started = False
        self.flush()
        self.workers = len(worker_coverage.read_acks(self.rendezvous))
        for owner, name, original, ours in reversed(self.replaced):
            if getattr(owner, name) is ours:  # else another hook stacked on ours: leave it
                setattr(owner, name, original)
        shutil.rmtree(self.rendezvous, ignore_errors=True)

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """The settings in this process's environment while Ray starts its processes."""
        before = os.environ.get(_VARIABLE)
        os.environ[_VARIABLE] = self.setting
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(_VARIABLE, None)
            else:
                os.environ[_VARIABLE] = before

    # -- saves and checks --------------------------------------------------------------

    def flush(self, deadline: float = _FLUSH_DEADLINE) -> int:
        """Have every live worker of this machine save now; returns how many answered.

        Workers answer within a tenth of a second unless Python is busy in them (a call
        that holds the GIL); a worker that ends meanwhile is not waited for.
        """
        if not self.rendezvous.is_dir() or not worker_coverage.read_acks(self.rendezvous):
            return 0  # no worker was ever measured: nothing to wait for
        number = worker_coverage.request_flush(self.rendezvous)
        host = socket.gethostname()
        end = time.monotonic() + deadline
        while True:
            acks = worker_coverage.read_acks(self.rendezvous)
            waiting = [
                pid
                for (where, pid), answered in acks.items()
                if where == host and answered < number and _alive(pid)
            ]
            if not waiting or time.monotonic() > end:
                return sum(answered >= number for answered in acks.values())
            time.sleep(0.02)

    def check_workers(self, shutdown: Any) -> None:
        """Raise if the cluster Ray connected to does not measure its workers for this run.

        One task (no CPU) asks a worker which run's coverage measures it; a cluster that
        was started outside the run (``ray.init(address=...)`` to a running one) has
        workers that nobody told.
        """
        import ray  # noqa: PLC0415

        probe = _ray_compat.mark_kit_remote(
            ray.remote(num_cpus=0, max_retries=0)(worker_coverage.active_run)
        )
        try:
            seen = ray.get(probe.remote(), timeout=_PROBE_DEADLINE)
        except Exception as exc:
            seen = f"no answer ({type(exc).__name__})"
        if seen == self.run:
            return
        address = ray.get_runtime_context().gcs_address
        shutdown()
        msg = (
            f"coverage of remote code cannot reach the workers of the Ray cluster at "
            f"{address}: it was started outside this run, so its workers do not run "
            f"coverage (a worker said: {seen!r}). Start the cluster inside the run "
            "(ray.init() with no address, or ray.cluster_utils.Cluster), or measure this "
            "test without --ray-cov / raytrace_kit.coverage()"
        )
        raise CoverageError(msg)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine still runs (a zombie has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust the signal check
    return stat.rpartition(")")[2].split()[0] != "Z"


def start_run() -> CoverageRun:
    """A started run with the settings of the coverage measuring this process, else the file's.

    For ``pytest --ray-cov``: with pytest-cov, its settings (``--cov``, ``--cov-branch``,
    its data file); without, the configuration file's, each worker writing a data file that
    ``coverage combine`` takes in.
    """
    module = _coverage_module()
    cov = module.Coverage.current() or module.Coverage(data_suffix=True, config_file=True)
    run = CoverageRun(cov)
    run.start()
    return run


@contextlib.contextmanager
def coverage(
    data_file: str | os.PathLike[str] | None = None, *, config_file: str | bool = True
) -> Iterator[Path]:
    """Measure coverage in this process and in every Ray worker started inside the block.

    With coverage already measuring this process (``coverage run``, pytest-cov), the
    workers use its settings and write their data files beside its own, for it to
    combine. Otherwise this process is measured too, with the settings of the user's
    coverage configuration (``.coveragerc``, ``setup.cfg``, ``tox.ini`` or
    ``[tool.coverage]`` in ``pyproject.toml``), and at the end of the block every data
    file is combined into ``data_file``, ready for ``coverage report``/``coverage html``.

    Start Ray inside the block (``ray.init()`` with no address, or
    ``ray.cluster_utils.Cluster``), and shut it down inside it too: the workers save
    before ``ray.shutdown()`` ends them; lines they run after the block are not counted.

    Args:
        data_file: where the combined data goes (default: the configuration's
            ``data_file``, ``.coverage``).
        config_file: as ``coverage.Coverage``'s: ``True`` reads the usual files, a path
            reads that file, ``False`` none.

    Yields:
        The data file (absolute) whose directory receives the workers' data files.

    Raises:
        CoverageError: coverage.py is not installed, or its start-up file is missing, or
            Ray connects to a cluster started outside the block.

    Example:
        .. code-block:: python

            with raytrace_kit.coverage(data_file=".coverage"):
                ray.init()
                ray.get([process.remote(item) for item in items])
                ray.shutdown()
            # then: coverage report -m
    """
    module = _coverage_module()
    outer = module.Coverage.current()
    ours = None
    if outer is None:
        chosen = {} if data_file is None else {"data_file": os.fspath(data_file)}
        ours = module.Coverage(data_suffix=True, config_file=config_file, **chosen)
    run = CoverageRun(outer or ours)
    run.start()
    if ours is not None:
        ours.start()
    try:
        yield run.data_file
    finally:
        run.stop()
        if ours is not None:
            ours.stop()
            ours.save()
            combined = module.Coverage(data_file=os.fspath(run.data_file), config_file=config_file)
            combined.combine()
            combined.save()
