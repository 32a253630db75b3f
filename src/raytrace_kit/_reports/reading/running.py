"""What runs on this machine, read from ``/proc``: Ray's clusters and the scripts of drivers.

Ray 2.60 writes no file that says a session ended, so whether one runs is read from the
processes themselves. Each Ray node on this machine is a ``raylet`` whose command line
names its session directory (``--session_dir=``), its cluster's GCS address
(``--gcs-address=``) and its node id (``--node_id=``); a head node also runs a
``gcs_server`` (``--session-dir=``). A session runs while one of those is alive.

A driver's pid is in the name of its core-worker log in the session's ``logs``
(``python-core-driver-<worker id>_<pid>.log``, whose first line is stamped when the
driver connected); while the driver runs, ``/proc/<pid>/cmdline`` says its script. A pid
can be reused once its process has ended: a process that started after the log's first
line is another one. Once the driver has ended, Ray keeps its script nowhere on disk.

Nothing here imports Ray. Without ``/proc`` (macOS, Windows) nothing is known to run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = [
    "KIT_RUN_VALUED",
    "Cluster",
    "RayNode",
    "clusters",
    "driver_logs",
    "ray_processes",
    "script_from_argv",
    "script_of",
    "shown_script",
]

_PROC = Path("/proc")
# Interpreter options that take a value (``-W ignore``): the value is not the script.
_WITH_VALUE = {"-W", "-X", "-Q", "--check-hash-based-pycs"}
_PYTHON = re.compile(r"^python[0-9.]*$")
_DRIVER_LOG = re.compile(r"^python-core-driver-(?P<worker>[0-9a-f]+)_(?P<pid>\d+)\.log$")
_LOG_STAMP = re.compile(rb"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) ")
_SLACK_S = 1.0  # the kernel's boot time is whole seconds: a start time is known to within 1 s


@dataclass(frozen=True)
class RayNode:
    """One Ray process on this machine: a ``raylet`` (a node) or a ``gcs_server``."""

    pid: int
    kind: str  # "raylet" or "gcs_server"
    session_dir: Path
    gcs_address: str | None
    node_id: str | None


@dataclass(frozen=True)
class Cluster:
    """A running Ray cluster with nodes on this machine, named by its GCS address."""

    address: str
    session_dir: Path
    nodes_here: int


def _flag(argv: list[str], *names: str) -> str | None:
    for argument in argv:
        for name in names:
            if argument.startswith(name + "="):
                return argument.split("=", 1)[1]
    return None


def _argv(pid: str | int) -> list[str]:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:  # ended while we looked, or not ours to read
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def ray_processes() -> list[RayNode] | None:
    """Every ``raylet`` and ``gcs_server`` running on this machine (``None``: no ``/proc``)."""
    if not (_PROC / "self" / "cmdline").exists():
        return None
    found = []
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        argv = _argv(entry.name)
        kind = Path(argv[0]).name if argv else ""
        if kind not in {"raylet", "gcs_server"}:
            continue
        session = _flag(argv, "--session_dir", "--session-dir")
        if session:
            found.append(
                RayNode(
                    int(entry.name),
                    kind,
                    Path(session),
                    _flag(argv, "--gcs-address"),
                    _flag(argv, "--node_id"),
                )
            )
    return found


def clusters(processes: list[RayNode]) -> list[Cluster]:
    """The clusters these processes belong to, one per GCS address, oldest session first."""
    nodes: dict[str, list[RayNode]] = {}
    for process in processes:
        if process.kind == "raylet" and process.gcs_address:
            nodes.setdefault(process.gcs_address, []).append(process)
    made = [Cluster(address, group[0].session_dir, len(group)) for address, group in nodes.items()]
    return sorted(made, key=lambda cluster: (cluster.session_dir.name, cluster.address))


def driver_logs(logs: Path) -> list[tuple[str, int, float | None]]:
    """The drivers a session's ``logs`` name: (job id, pid, when it connected), in job order."""
    found = []
    try:
        entries = list(os.scandir(logs))
    except OSError:
        return []
    for entry in entries:
        match = _DRIVER_LOG.match(entry.name)
        if match:
            job_id = match["worker"][:8]  # a driver's worker id is its job id, then ff...
            found.append((job_id, int(match["pid"]), _first_stamp(Path(entry.path))))
    return sorted(found)


def _first_stamp(log: Path) -> float | None:
    """When a core-worker log's first line was written (Ray stamps it in local time)."""
    try:
        with log.open("rb") as handle:
            first = handle.readline(200)
    except OSError:
        return None
    match = _LOG_STAMP.match(first)
    if not match:
        return None
    return datetime.strptime(match[1].decode(), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _started(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from ``/proc``; ``None`` if it is gone."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        boot = next(
            line for line in (_PROC / "stat").read_text().splitlines() if line.startswith("btime")
        )
    except (OSError, StopIteration):
        return None
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, after the command's name
    return int(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def script_of(pid: int, connected: float | None) -> str | None:
    """The script of the driver ``pid`` if it still runs (see :func:`script_from_argv`).

    ``connected`` is when the driver connected: a process that started later has reused
    the pid.
    """
    started = _started(pid)
    if started is None or (connected is not None and started > connected + _SLACK_S):
        return None
    return script_from_argv(_argv(pid))


def script_from_argv(argv: list[str]) -> str | None:
    """What a process runs, from its command line, without its arguments.

    ``python pipeline.py --token x`` is ``pipeline.py``; ``python -m pytest -k y`` is
    ``python -m pytest``; ``python -c ...`` is ``python -c`` (never the code); a console
    script (``/venv/bin/python /venv/bin/pytest -q``) is its path; another program is its
    own path. ``raytrace-kit run pipeline.py`` (or ``python -m raytrace_kit run ...``) is
    the program it runs, ``pipeline.py``. Arguments, which may hold secrets, are never
    part of it.
    """
    if not argv:
        return None
    program = argv[0].split(" ", 1)[0]  # a process that set its title puts it all in one
    if not _PYTHON.match(Path(program).name):
        return program
    return _python_runs(iter(argv[1:]))


def _python_runs(rest: Iterator[str]) -> str:
    """What ``python`` runs, given its arguments (see :func:`script_from_argv`)."""
    for argument in rest:
        if argument in {"-m", "-c"}:
            module = next(rest, "") if argument == "-m" else ""
            if module == "raytrace_kit":
                return _kit_run(rest) or "python -m raytrace_kit"
            return f"python {argument} {module}".rstrip()
        if argument in _WITH_VALUE:
            next(rest, None)
        elif argument == "-" or not argument.startswith("-"):
            if Path(argument).name == "raytrace-kit":
                return _kit_run(rest) or argument
            return argument if argument != "-" else "python -"
    return "python"


# ``raytrace-kit run``'s options that take a value (cli/run.py splits its argv by them too).
KIT_RUN_VALUED = frozenset({"--profile", "--check", "--include", "--exclude", "--capture"})


def _kit_run(rest: Iterator[str]) -> str | None:
    """The program of ``raytrace-kit run [OPTIONS] [--] SCRIPT | -m MODULE``, or None."""
    if next(rest, None) != "run":
        return None
    for argument in rest:
        if argument == "--":
            return next(rest, None)
        if argument == "-m":
            module = next(rest, None)
            return f"python -m {module}" if module else None
        if argument == "-" or not argument.startswith("-"):
            return argument
        if argument in KIT_RUN_VALUED:
            next(rest, None)
    return None


def shown_script(script: str) -> str:
    """A script as one line shows it: a path by its file's name, the rest as it is."""
    if " " not in script and "/" in script:
        return Path(script).name
    return script
