"""Why a worker died, from Ray's own records in the session's ``logs`` directory.

Ray's GCS (on the head node) writes one record per worker exit in ``gcs_server.out``:

    [...] (gcs_server) gcs_worker_manager.cc:70: Reporting worker exit, worker id = W,
    node id = N, address = A, exit_type = T, exit_detail = D

with ``T`` one of ``SYSTEM_ERROR``, ``NODE_OUT_OF_MEMORY`` (Ray's memory monitor killed
it; ``D`` then spans lines with the node's memory use), ``USER_ERROR``,
``INTENDED_USER_EXIT``, ``INTENDED_SYSTEM_EXIT``. Ray 2.60 does not record a signal or an
exit status when a process vanishes (SIGKILL, ``os._exit``, a segfault all read
"connection error code 2. End of file", or "RPC error: Socket closed" when the process
that submitted the task noticed first); a fatal signal Python saw leaves
``*** SIGSEGV received ...`` in the worker's ``worker-<worker id>-*.err``, and
``sys.exit(n)`` leaves "exit code n" in ``D``. The kit's events carry each call's worker
id, so an interrupted call joins its worker's record.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["WorkerDeath", "death_finding", "find_ray_logs", "worker_deaths"]

_HEADER = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [DIWEF] \d+ \d+\] ")
_EXIT = re.compile(
    r"Reporting worker exit, worker id = (?P<worker>[0-9a-f]+), node id = (?P<node>[0-9a-f]+), "
    r"address = (?P<address>\S+), exit_type = (?P<type>[A-Z_]+), exit_detail = (?P<detail>.*)",
    re.DOTALL,
)
_CODE = re.compile(r"exits with an exit code (?P<code>-?\d+)")
_SIGNAL = re.compile(r"\*\*\* (?P<signal>SIG[A-Z]+) received at time=")
_MEMORY = re.compile(r"Memory on the node \(IP: [^,]+, ID: [0-9a-f]+\) was (?P<use>[^\n]+)")
_SIGNAL_NUMBERS = {"SIGSEGV": 11, "SIGBUS": 7, "SIGABRT": 6, "SIGFPE": 8, "SIGILL": 4}
_MAX_DETAIL = 2000
# How Ray words a process that vanished: the raylet saw its socket close ("connection error
# code 2. End of file"), or its owner's RPC did ("RPC error: Socket closed"), first.
_VANISHED = ("End of file", "connection error", "Socket closed")
_TAIL = 256 * 1024


@dataclass(frozen=True)
class WorkerDeath:
    """One worker's exit as Ray recorded it, and what it means.

    ``exit_type`` is Ray's (``SYSTEM_ERROR``, ``NODE_OUT_OF_MEMORY``...), ``detail`` Ray's
    own words, ``exit_code`` the status Ray saw when Python exited (``sys.exit(n)``),
    ``signal`` a fatal signal the worker's log shows (``SIGSEGV``...).
    """

    worker_id: str
    node_id: str
    exit_type: str
    detail: str
    exit_code: int | None = None
    signal: str | None = None
    err_file: str | None = None  # the worker's stderr, where Python printed the crash
    held: int | None = None  # the process's RSS at its last record (bytes), where known

    @property
    def kind(self) -> str:
        """What ended it: ``oom``, ``crash``, ``exit``, ``killed``, ``intended``, ``other``.

        ``crash`` is a fatal signal, ``exit`` an exit code, ``killed`` a process that
        vanished (SIGKILL or ``os._exit``).
        """
        if self.exit_type == "NODE_OUT_OF_MEMORY":
            return "oom"
        if self.signal is not None:
            return "crash"
        if self.exit_code is not None:
            return "exit"
        if any(words in self.detail for words in _VANISHED):
            return "killed"
        return "intended" if self.exit_type.startswith("INTENDED") else "other"

    @property
    def cause(self) -> str:
        """What killed it, in plain words."""
        kind = self.kind
        if kind == "oom":
            used = _MEMORY.search(self.detail)
            return "killed by Ray's memory monitor: the node was running out of memory" + (
                f" ({used['use'].strip()})" if used else ""
            )
        if kind == "crash":
            number = _SIGNAL_NUMBERS.get(self.signal or "")
            status = f", exit status {128 + number}" if number else ""
            return f"crashed in native code: {self.signal}{status}"
        if kind == "exit" and "SIGTERM" in self.detail:
            return f"received SIGTERM (exit code {self.exit_code}): ray stop, or a kill"
        first = self.detail.splitlines()[0] if self.detail else ""
        if kind == "killed" and self.little_memory:
            return (
                f"vanished without Python shutting down while holding only "
                f"{(self.held or 0) / 2**20:.0f} MiB at its last record (this call's start): "
                "unless the call grew it, the kernel's OOM killer, which picks the largest "
                "process, is unlikely; more likely a signal sent to it (kill -9, a scheduler "
                "or container limit, ray stop --force), os._exit() in its code, or its node lost"
            )
        return {
            "exit": f"exited with code {self.exit_code}: sys.exit() or exit() in the process",
            "killed": "vanished without Python shutting down: SIGKILL (exit status 137, most "
            "often the kernel's OOM killer; also kill -9 or ray stop --force) or os._exit()",
            "intended": "ended on purpose: ray.kill, ray.actor.exit_actor(), or its job ended",
        }.get(kind, f"{self.exit_type}: {first}")

    @property
    def little_memory(self) -> bool:
        """Whether the process held too little memory to be an OOM killer's pick."""
        if self.held is None:
            return False
        total = _machine_memory()
        return self.held < _LITTLE_BYTES and (total is None or self.held < total // 10)

    @property
    def fix(self) -> str:
        """What to do about it."""
        if self.kind == "killed" and self.little_memory:
            return _KILLED_NOT_MEMORY_FIX
        fix = _FIXES.get(self.kind, "see Ray's record of the worker in gcs_server.out")
        if self.kind == "crash" and self.err_file:
            fix = fix.replace("the worker's .err file", self.err_file)
        return fix


_LITTLE_BYTES = 2**30  # a process under this (and a tenth of the machine) is no OOM pick


def _machine_memory() -> int | None:
    """The memory this machine gives its processes (bytes): its total, or a cgroup's limit.

    Read where the report runs, usually the node itself; in a container, the cgroup's
    limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) is what the OOM killer uses.
    """
    sizes = []
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo", "rb") as info:
        sizes.append(int(info.readline().split()[1]) * 1024)  # "MemTotal: N kB"
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            sizes.append(int(Path(limit).read_text().split()[0]))  # "max" is no number
    return min(sizes) if sizes else None


_KILLED_NOT_MEMORY_FIX = (
    "first dmesg on that node: 'Out of memory: Killed process <pid>' means the call grew it "
    "after all (see its memory with profile='memray'); else find what sent the signal: the "
    "job scheduler's or container runtime's logs; search the code for os._exit(; raylet.out "
    "and gcs_server.out say whether the node itself was lost"
)
_MEMORY_FIX = (
    "run fewer tasks at once per node (num_cpus= or memory= per task) or use less memory per "
    "call; find what grows with @debuggable(profile='memray')"
)
_FIXES = {
    "oom": _MEMORY_FIX,
    "killed": _MEMORY_FIX + "; dmesg on the node shows the kernel's 'Out of memory: Killed "
    "process <pid>' if it was the OOM killer",
    "crash": "the worker's .err file has Python's stack at the crash (faulthandler); check the "
    "native libraries it calls, or run the call in local mode under a debugger",
    "exit": "find what exits: a library calling sys.exit(), or a failed check",
}


def find_ray_logs(root: Path) -> Path | None:
    """The Ray ``logs`` directory of a session's records, if they are in or above ``root``.

    ``root`` may be the Ray session directory, its ``logs/raytrace_kit``, a collection made
    inside it, or an event file there.
    """
    for place in [root, *root.parents][:5]:
        for logs in (place / "logs", place):
            if (logs / "gcs_server.out").is_file() or (logs / "raylet.out").is_file():
                return logs
    return None


def worker_deaths(logs: Path, worker_ids: Iterable[str]) -> dict[str, WorkerDeath]:
    """Ray's records of the exits of ``worker_ids``, by worker id (absent: no record)."""
    wanted = {w for w in worker_ids if w}
    if not wanted:
        return {}
    found: dict[str, WorkerDeath] = {}
    err_files: dict[str, list[Path]] | None = None  # listed once, when a death is found
    for path in sorted(logs.glob("gcs_server*.out*")):
        for record in _records(path, "Reporting worker exit"):
            match = _EXIT.search(record)
            if match is None or match["worker"] not in wanted:
                continue
            detail = match["detail"].strip()[:_MAX_DETAIL]
            code = _CODE.search(detail)
            if err_files is None:
                err_files = _err_files(logs)
            signal, err_file = _signal(err_files.get(match["worker"], []))
            found[match["worker"]] = WorkerDeath(
                worker_id=match["worker"],
                node_id=match["node"],
                exit_type=match["type"],
                detail=detail,
                exit_code=int(code["code"]) if code else None,
                signal=signal,
                err_file=err_file,
            )
    return found


def _records(path: Path, phrase: str) -> Iterable[str]:
    """The records of a Ray log that contain ``phrase``, with their continuation lines."""
    current: list[str] | None = None
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            if line.startswith("[") and _HEADER.match(line):
                if current is not None:
                    yield "".join(current)
                current = [line] if phrase in line else None
            elif current is not None and not line.startswith("[state-dump]"):
                current.append(line)
    if current is not None and current[-1].endswith("\n"):  # Ray may be writing the last
        yield "".join(current)


def _err_files(logs: Path) -> dict[str, list[Path]]:
    """The workers' ``worker-<worker id>-<job>-<pid>.err`` files, by worker id.

    Ray moves dead workers' logs to ``logs/old``, so both places are listed, once for all
    the deaths a report looks up (a Ray logs directory may hold thousands of files).
    """
    found: dict[str, list[Path]] = {}
    for folder in (logs, logs / "old"):
        for path in folder.glob("worker-*.err"):
            found.setdefault(path.name.split("-", 2)[1], []).append(path)
    return found


def _signal(paths: list[Path]) -> tuple[str | None, str | None]:
    """A fatal signal a worker's own log (one of ``paths``) shows, and that log's path."""
    for path in paths:
        try:
            with path.open("rb") as handle:  # the crash is at the end: read the tail
                handle.seek(max(path.stat().st_size - _TAIL, 0))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        match = _SIGNAL.search(text)
        if match:
            return match["signal"], str(path)
    return None, None


_DEATH_TITLES = {
    "oom": "Out-of-memory kills cut calls off",
    "killed": "Processes killed during calls (SIGKILL or os._exit)",
    "crash": "Native crashes during calls",
    "exit": "Processes exited during calls",
    "intended": "Processes ended on purpose during calls",
}


def death_finding(
    kind: str, count: int, functions: str, first: dict[str, Any], logs: Path | None
) -> tuple[str, str, str]:
    """A report's finding on calls cut off by deaths of one kind: title, evidence, fix.

    ``first`` is one of the calls (its ``cause`` and ``fix`` from Ray's records); ``kind``
    is :attr:`WorkerDeath.kind`, or ``unknown`` when Ray left no record of the workers.
    """
    if kind == "unknown":
        where = "no Ray record of their workers was found" + (
            f" in {logs}" if logs else " (open the Ray session directory to use its logs)"
        )
        return (
            "Processes died during calls",
            f"{count} call(s) of {functions} never ended and their process is gone; "
            f"{where}. Most often the OOM killer (exit status 137) or a native crash (139)",
            "compare their rss at start with the node's memory; give tasks more memory or "
            "run fewer at once",
        )
    return (
        _DEATH_TITLES.get(kind, "Processes died during calls"),
        f"{count} call(s) of {functions} never ended: their process {first['cause']}",
        first["fix"] or "",
    )
