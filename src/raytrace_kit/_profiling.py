"""memray and cProfile: per call, per block, and turning their files into pictures and tables.

memray is imported only when a memory profile is taken or read. One memray tracker may be
active per process: a call or block that finds it taken runs unprofiled and logs a
``profile.skipped`` event; it never raises.
"""

from __future__ import annotations

import atexit
import contextvars
import cProfile
import hashlib
import html
import importlib.util
import itertools
import json
import os
import pstats
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit import _events, _paths
from raytrace_kit._options import ProfileKind
from raytrace_kit.exceptions import RaytraceKitWarning

if TYPE_CHECKING:
    from raytrace_kit._execute import CallSpec

__all__ = [
    "BLOCK",
    "CpuStats",
    "ProfileBlock",
    "ProfileSummary",
    "cpu_stats",
    "flamegraph",
    "memray_available",
    "profile_cpu",
    "profile_memory",
    "profile_summary",
    "start_call",
    "validate_profile_options",
]

MEMRAY_OPTIONS = frozenset(
    {"native_traces", "trace_python_allocators", "follow_fork", "file_format", "memory_interval_ms"}
)
CPROFILE_OPTIONS = frozenset({"timeunit", "subcalls", "builtins"})
_NAME_LIMIT = 80


def memray_available() -> bool:
    """Whether memray can be imported here (it is not available on Windows)."""
    return importlib.util.find_spec("memray") is not None


def validate_profile_options(kind: str | None, options: dict[str, Any]) -> str | None:
    """Return what is wrong with ``profile``/``profile_options``, or ``None``."""
    if kind == "memray" and not memray_available():
        return (
            "profile='memray' needs memray, which is not installed here (it does not support "
            "Windows): `pip install memray`, or use profile='cprofile'."
        )
    allowed = MEMRAY_OPTIONS if kind == "memray" else CPROFILE_OPTIONS
    unknown = sorted(set(options) - allowed)
    if options and kind is None:
        return "profile_options needs profile='memray' or profile='cprofile'."
    if unknown:
        return (
            f"unknown {kind} option(s) {', '.join(unknown)}; valid ones are: "
            f"{', '.join(sorted(allowed))}."
        )
    return None


def profiles_dir() -> Path:
    """``log_dir() / "profiles"`` on this node."""
    return _paths.log_dir() / "profiles"


def _sanitize(text: str, limit: int = _NAME_LIMIT) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip(".") or "call"
    if len(clean) <= limit:
        return clean
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:8]
    return f"{clean[: limit - 9]}-{digest}"


def call_profile_path(call: _events.ActiveCall, function: str, kind: str, profiler: str) -> Path:
    """``<function>.<kind>.<task id>.a<attempt>.<call id>.<bin|prof>`` in the profiles dir.

    The task id and attempt say which Ray task and retry it was; the call id makes the name
    unique per execution whatever runs it (local calls have no task id).
    """
    task = call.task_id or "local"
    suffix = "bin" if profiler == "memray" else "prof"
    name = f"{_sanitize(function)}.{kind}.{task}.a{call.attempt or 0}.{call.call_id}.{suffix}"
    return profiles_dir() / name


# --- one memray tracker per process; one cProfile per thread ------------------------------

_guard = threading.Lock()
_memray_busy = False
_cprofile_threads: set[int] = set()


def _acquire(profiler: str) -> bool:
    global _memray_busy  # noqa: PLW0603 -- the process-wide slot memray allows
    with _guard:
        if profiler == "memray":
            if _memray_busy:
                return False
            _memray_busy = True
            return True
        thread = threading.get_ident()
        if thread in _cprofile_threads:
            return False
        _cprofile_threads.add(thread)
        return True


def _release(profiler: str, thread: int) -> None:
    global _memray_busy  # noqa: PLW0603 -- see _acquire
    with _guard:
        if profiler == "memray":
            _memray_busy = False
        else:
            _cprofile_threads.discard(thread)


def _skipped(reason: str, function: str, profiler: str) -> None:
    _events.emit(
        "profile.skipped", "warning", {"function": function, "profiler": profiler, "reason": reason}
    )


class _Running:
    """One running profiler: a memray tracker or a cProfile profiler, writing to ``path``."""

    def __init__(self, profiler: str, path: Path, options: dict[str, Any]) -> None:
        self.profiler = profiler
        self.path = path
        self.thread = threading.get_ident()
        self.started = time.time()
        self._tracker: Any = None
        self._profile: cProfile.Profile | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        if profiler == "memray":
            import memray  # noqa: PLC0415 -- imported only when a memory profile is taken

            opts = dict(options)
            if isinstance(opts.get("file_format"), str):
                opts["file_format"] = memray.FileFormat[opts["file_format"]]
            self._tracker = memray.Tracker(str(path), **opts)
            self._tracker.__enter__()
        else:
            self._profile = cProfile.Profile(**options)
            self._profile.enable()

    def stop(self) -> None:
        try:
            if self._tracker is not None:
                self._tracker.__exit__(None, None, None)
            elif self._profile is not None:
                self._profile.disable()
                self._profile.dump_stats(str(self.path))
        finally:
            _release(self.profiler, self.thread)

    def peak_memory(self) -> int | None:
        if self.profiler != "memray":
            return None
        import memray  # noqa: PLC0415

        reader = memray.FileReader(str(self.path))
        try:
            return int(reader.metadata.peak_memory)
        finally:
            reader.close()


def _start(profiler: str, path: Path, options: dict[str, Any], function: str) -> _Running | None:
    """Start a profiler, or log why not (``profile.skipped``) and return ``None``."""
    if profiler == "memray" and not memray_available():
        _skipped("memray is not installed in this process", function, profiler)
        return None
    if not _acquire(profiler):
        where = "process" if profiler == "memray" else "thread"
        _skipped(f"another {profiler} profiler is active in this {where}", function, profiler)
        return None
    try:
        return _Running(profiler, path, options)
    except Exception as exc:
        _release(profiler, threading.get_ident())
        _skipped(f"could not start: {type(exc).__name__}: {exc}", function, profiler)
        return None


class CallProfile:
    """The profiler of one instrumented call (see ``_execute._Boundary``)."""

    def __init__(self, running: _Running, spec: CallSpec, call: _events.ActiveCall) -> None:
        self.running = running
        self.spec = spec
        self.call = call

    def finish(self, exc: BaseException | None) -> str:
        """Stop, write the sidecar; return JSON members for ``call.end`` (``profile_path``)."""
        running = self.running
        actor_scope = self.spec.options.profile_scope == "actor"
        if actor_scope and self.spec.kind == "actor_init" and exc is None:
            # Leak hunting: the capture runs for the actor's whole life, until it exits.
            atexit.register(running.stop)
            return f',"profile_path":{json.dumps(str(running.path))},"profile_scope":"actor"'
        running.stop()
        duration = time.time() - running.started
        call = self.call
        sidecar: dict[str, Any] = {
            "function": self.spec.function,
            "kind": self.spec.kind,
            "call_id": call.call_id,
            "task_id": call.task_id,
            "actor_id": call.actor_id,
            "node_id": call.identity.node_id,
            "pid": call.identity.pid,
            "attempt": call.attempt,
            "profiler": running.profiler,
            "path": str(running.path),
            "start": datetime.fromtimestamp(running.started, timezone.utc).isoformat(),
            "duration_s": round(duration, 6),
            "status": "ok" if exc is None else "error",
            "profile_block": self.spec.options.profile_block,
        }
        try:
            sidecar["peak_memory_bytes"] = running.peak_memory()
        except Exception:
            sidecar["peak_memory_bytes"] = None
        running.path.with_suffix(".json").write_text(json.dumps(sidecar, indent=1))
        tail = f',"profile_path":{json.dumps(str(running.path))}'
        if self.spec.options.profile_block:
            tail += f',"profile_block":{json.dumps(self.spec.options.profile_block)}'
        return tail


def start_call(spec: CallSpec, call: _events.ActiveCall) -> CallProfile | None:
    """Start the profiler of one call, per its options; ``None`` if it runs unprofiled."""
    options = spec.options
    profiler = options.profile
    if profiler is None:
        return None
    if options.profile_scope == "actor" and spec.kind != "actor_init":
        return None  # the actor's own capture, started in __init__, covers its calls
    if call.call_id is None:
        call.capture()
    path = call_profile_path(call, spec.function, spec.kind, profiler)
    running = _start(profiler, path, dict(options.profile_options), spec.function)
    return None if running is None else CallProfile(running, spec, call)


# --- blocks: with profile_memory(): / with profile_cpu(): --------------------------------


@dataclass
class ProfileBlock:
    """What ``with profile_memory() as p`` / ``with profile_cpu() as p`` gives.

    Attributes:
        kind: ``memray`` or ``cprofile``.
        path: The file written, or ``None`` if the block ran unprofiled (see the
            ``profile.skipped`` event and the warning).
        id: Identifies the block; calls submitted inside it carry it as ``profile_block``.
    """

    kind: ProfileKind
    path: Path | None
    id: str = field(default_factory=lambda: os.urandom(6).hex())

    @property
    def remote_profiles(self) -> list[Path]:
        """Files of debuggable calls submitted inside the block and finished since.

        Found through their ``call.end`` events on this node (on one machine, that is every
        node of a local cluster). Read it after ``ray.get`` of those calls.
        """
        return [
            Path(e["profile_path"])
            for e in _events.read_events()
            if e.get("event") == "call.end" and e.get("profile_block") == self.id
        ]

    def summary(self, top: int = 10) -> ProfileSummary:
        """The headline of the profile.

        memray: the peak and the top allocation sites; cProfile: the functions with the
        most cumulative time.

        Raises:
            FileNotFoundError: The block ran unprofiled (``path`` is ``None``).
        """
        if self.path is None:
            msg = "this block ran unprofiled (see the profile.skipped event): no file to read"
            raise FileNotFoundError(msg)
        return profile_summary(self.path, top=top)


BLOCK: contextvars.ContextVar[ProfileBlock | None] = contextvars.ContextVar(
    "raytrace_kit_profile_block", default=None
)
_block_counter = itertools.count()


def _block_path(kind: ProfileKind, path: str | os.PathLike[str] | None) -> Path:
    if path is not None:
        return Path(path)
    suffix = "bin" if kind == "memray" else "prof"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    name = f"block-{kind}-{stamp}-{os.getpid()}-{next(_block_counter)}.{suffix}"
    return profiles_dir() / name


@contextmanager
def _profile_block(
    kind: ProfileKind, path: str | os.PathLike[str] | None, options: dict[str, Any]
) -> Iterator[ProfileBlock]:
    block = ProfileBlock(kind, _block_path(kind, path))
    running = _start(kind, block.path, options, "block") if block.path else None
    if running is None:
        block.path = None
        warnings.warn(
            f"raytrace_kit: the {kind} block runs unprofiled (see the profile.skipped event).",
            RaytraceKitWarning,
            stacklevel=3,
        )
    token = BLOCK.set(block)
    try:
        yield block
    finally:
        BLOCK.reset(token)
        if running is not None:
            running.stop()


def profile_memory(
    path: str | os.PathLike[str] | None = None, **memray_options: Any
) -> AbstractContextManager[ProfileBlock]:
    """Record memory allocations of a block with memray: on the driver, in a notebook, in a task.

    Debuggable calls submitted inside the block (to Ray workers) are profiled in their
    workers too; their files are listed on ``p.remote_profiles`` after ``ray.get``.

    Args:
        path: The capture file (it must not exist); default: a new file in
            ``log_dir() / "profiles"``.
        **memray_options: ``native_traces``, ``trace_python_allocators``, ``follow_fork``,
            ``file_format``, ``memory_interval_ms`` (as for ``memray.Tracker``).

    Returns:
        A context manager giving a :class:`ProfileBlock` (``p.path``, ``p.summary()``).

    Example:
        >>> with profile_memory() as p:
        ...     build_index()
        >>> print(p.summary())
    """
    problem = validate_profile_options("memray", memray_options)
    if problem:
        raise ValueError(problem)
    return _profile_block("memray", path, memray_options)


def profile_cpu(
    path: str | os.PathLike[str] | None = None, **cprofile_options: Any
) -> AbstractContextManager[ProfileBlock]:
    """Profile CPU time of a block with cProfile; debuggable calls inside are profiled too.

    Args:
        path: The ``.prof`` file to write; default: a new file in ``log_dir() / "profiles"``.
        **cprofile_options: ``timeunit``, ``subcalls``, ``builtins`` (as for
            ``cProfile.Profile``).

    Returns:
        A context manager giving a :class:`ProfileBlock` (``p.path``, ``p.summary()``).
    """
    problem = validate_profile_options("cprofile", cprofile_options)
    if problem:
        raise ValueError(problem)
    return _profile_block("cprofile", path, cprofile_options)


# --- reading profiles ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileSummary:
    """The headline of one profile.

    Attributes:
        kind: ``memray`` or ``cprofile``.
        path: The file summarized.
        peak_memory_bytes: memray: the peak of memory held by tracked allocations.
        top: memray: the allocation sites holding the most memory at the peak
            (``function``, ``file``, ``line``, ``size_bytes``, ``allocations``); cProfile:
            the functions with the most cumulative time (``function``, ``file``, ``line``,
            ``calls``, ``cumulative_s``, ``total_s``).
    """

    kind: str
    path: Path
    peak_memory_bytes: int | None
    top: tuple[dict[str, Any], ...]

    def __str__(self) -> str:
        lines = [f"{self.kind} profile {self.path}"]
        if self.kind == "memray":
            lines.append(f"peak memory: {_bytes(self.peak_memory_bytes or 0)}")
            for row in self.top:
                lines.append(
                    f"  {_bytes(row['size_bytes']):>10}  {row['allocations']:>8} allocs  "
                    f"{row['function']} ({row['file']}:{row['line']})"
                )
        else:
            for row in self.top:
                lines.append(
                    f"  {row['cumulative_s']:9.4f}s cum {row['total_s']:9.4f}s own "
                    f"{row['calls']:>7} calls  {row['function']} ({row['file']}:{row['line']})"
                )
        return "\n".join(lines)


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover -- the loop always returns


def profile_summary(path: str | os.PathLike[str], top: int = 10) -> ProfileSummary:
    """The headline of a memray capture (``.bin``) or a cProfile file (``.prof``).

    Args:
        path: A profile file, e.g. a call's ``profile_path`` or a block's ``p.path``.
        top: How many allocation sites (memray) or functions (cProfile) to list.

    Returns:
        A :class:`ProfileSummary`: memray's peak and top allocation sites at the peak, or
        the functions with the most cumulative time.
    """
    file = Path(path)
    if file.suffix == ".prof":
        stats = cpu_stats([file], top=top)
        return ProfileSummary("cprofile", file, None, tuple(stats.rows()))
    import memray  # noqa: PLC0415

    reader = memray.FileReader(str(file))
    try:
        records = sorted(
            reader.get_high_watermark_allocation_records(merge_threads=True),
            key=lambda r: r.size,
            reverse=True,
        )[:top]
        rows = []
        for record in records:
            frames = record.stack_trace(max_stacks=1)
            function, filename, line = frames[0] if frames else ("<unknown>", "<unknown>", 0)
            rows.append(
                {
                    "function": function,
                    "file": filename,
                    "line": line,
                    "size_bytes": record.size,
                    "allocations": record.n_allocations,
                }
            )
        return ProfileSummary("memray", file, int(reader.metadata.peak_memory), tuple(rows))
    finally:
        reader.close()


class FlameGraph(type(Path())):  # type: ignore[misc]  # the concrete Path class of this OS
    """The path of a memray HTML flame graph; shows inline in a notebook."""

    def _repr_html_(self) -> str:
        source = html.escape(self.read_text(encoding="utf-8"), quote=True)
        return f'<iframe srcdoc="{source}" style="width:100%;height:600px;border:0"></iframe>'


def flamegraph(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Render a memray capture to memray's HTML flame graph.

    Args:
        path: A memray capture (``.bin``), e.g. a call's ``profile_path``.
        out: The HTML file to write (replaced if it exists); default: ``path`` with
            ``.html``.

    Returns:
        The HTML file (displayed inline in a notebook).

    Raises:
        RuntimeError: memray could not render the file (its message is included).
    """
    source = Path(path)
    target = Path(out) if out is not None else source.with_suffix(".html")
    command = [
        sys.executable,
        "-m",
        "memray",
        "flamegraph",
        "--force",
        "-o",
        str(target),
        str(source),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        msg = f"memray could not render {source}: {done.stderr.strip() or done.stdout.strip()}"
        raise RuntimeError(msg)
    return FlameGraph(target)


class CpuStats:
    """cProfile statistics merged from many files (all calls of a function, all workers).

    Attributes:
        stats: The merged ``pstats.Stats``, for everything pstats offers.
        files: The files merged.
    """

    def __init__(self, stats: pstats.Stats, files: list[Path], top: int) -> None:
        self.stats = stats
        self.files = files
        self.top = top

    def rows(self, top: int | None = None) -> list[dict[str, Any]]:
        """The functions with the most cumulative time, as dicts."""
        entries = self.stats.stats  # type: ignore[attr-defined]  # pstats' own table
        ordered = sorted(entries.items(), key=lambda item: item[1][3], reverse=True)
        return [
            {
                "function": name,
                "file": file,
                "line": line,
                "calls": primitive_calls,
                "cumulative_s": cumulative,
                "total_s": total,
            }
            for (file, line, name), (primitive_calls, _n, total, cumulative, _callers) in ordered[
                : top or self.top
            ]
        ]

    def calls(self, function: str) -> int:
        """How many times a function was called, summed over its entries.

        ``function`` is a name as cProfile records it (``nap``), and builtins match by
        their short or dotted name too (``sleep`` or ``time.sleep`` for
        ``<built-in method time.sleep>``).
        """
        return sum(
            row[0]
            for (_f, _l, name), row in self.stats.stats.items()  # type: ignore[attr-defined]
            if _names_match(name, function)
        )

    def __str__(self) -> str:
        lines = [f"cProfile stats merged from {len(self.files)} file(s)"]
        lines.append(f"  {'calls':>8} {'own s':>9} {'cum s':>9}  function")
        for row in self.rows():
            lines.append(
                f"  {row['calls']:>8} {row['total_s']:9.4f} {row['cumulative_s']:9.4f}  "
                f"{row['function']} ({Path(row['file']).name}:{row['line']})"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{r['calls']}</td><td>{r['total_s']:.4f}</td><td>{r['cumulative_s']:.4f}</td>"
            f"<td><code>{html.escape(str(r['function']))}</code></td>"
            f"<td>{html.escape(Path(r['file']).name)}:{r['line']}</td></tr>"
            for r in self.rows()
        )
        return (
            f"<p>cProfile stats merged from {len(self.files)} file(s)</p><table><thead><tr>"
            "<th>calls</th><th>own s</th><th>cum s</th><th>function</th><th>where</th>"
            f"</tr></thead><tbody>{body}</tbody></table>"
        )


def _names_match(recorded: str, wanted: str) -> bool:
    if recorded == wanted:
        return True
    if recorded.startswith("<") and recorded.endswith(">"):  # <built-in method time.sleep>
        dotted = recorded[1:-1].rsplit(" ", 1)[-1]
        return dotted == wanted or dotted.endswith(f".{wanted}")
    return False


def cpu_stats(
    paths_or_directory: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], top: int = 20
) -> CpuStats:
    """Merge cProfile files into one view: every call of a function, from every worker.

    Args:
        paths_or_directory: ``.prof`` files, or a directory searched recursively for them
            (e.g. ``log_dir() / "profiles"``).
        top: How many functions the table shows.

    Returns:
        A :class:`CpuStats` (a readable ``str()``, ``_repr_html_``, ``.stats`` for pstats).

    Raises:
        FileNotFoundError: No ``.prof`` file was found.
    """
    if isinstance(paths_or_directory, str | os.PathLike):
        root = Path(paths_or_directory)
        files = sorted(root.rglob("*.prof")) if root.is_dir() else [root]
    else:
        files = [Path(p) for p in paths_or_directory]
    if not files:
        msg = f"no .prof files in {paths_or_directory}"
        raise FileNotFoundError(msg)
    stats = pstats.Stats(str(files[0]))
    for file in files[1:]:
        stats.add(str(file))
    return CpuStats(stats, files, top)
