"""The sampling profiler's files read back: each process's samples, merged, filtered, ranked.

Reads what :mod:`raytrace_kit._output.samples` writes (its docstring has the records). A
line cut short by a crash, or a record naming a frame the file does not define (never
written: the process died mid-flush), is skipped, as event readers skip a torn line.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raytrace_kit._output.frames import in_stdlib
from raytrace_kit._output.tracebacks import KIT_DIR

__all__ = [
    "SAMPLES_GLOB",
    "Frame",
    "SampleRow",
    "SamplesReader",
    "add_hot_lines",
    "from_users_code",
    "hottest_line",
    "hottest_lines",
    "read_samples",
    "select",
    "user_leaf",
]

SAMPLES_GLOB = "samples-*.jsonl"


@dataclass(frozen=True, slots=True)
class Frame:
    """One place in the code: the function's qualified name, its file and line."""

    name: str
    file: str
    line: int

    @property
    def label(self) -> str:
        """``name (file:line)``, as py-spy and the folded stacks name a frame."""
        return f"{self.name} ({self.file}:{self.line})"


@dataclass(frozen=True, slots=True)
class SampleRow:
    """Samples of one stack, in one thread of one process, for one call (or none).

    Attributes:
        stack: The frames, outermost first.
        process: ``node id prefix/pid``.
        thread: The thread's name.
        call_id: The call's id (``None``: no instrumented call, or one with ``log=False``).
        function: The call's function (``None``: no call).
        actor_id: The actor the call ran in, if any.
        waiting: Whether the thread waited (``ray.get``, a lock, ``sleep``...).
        count: How many samples.
        seconds: ``count`` over the process's sampling rate.
        driver: The script, when the process is a driver (``raytrace-kit run --sample``,
            ``instrument(sample=...)``); ``None`` in a worker.
    """

    stack: tuple[Frame, ...]
    process: str
    thread: str
    call_id: str | None
    function: str | None
    actor_id: str | None
    waiting: bool
    count: int
    seconds: float
    driver: str | None = None


def read_samples(paths: Iterable[Path], *, since: float | None = None) -> list[SampleRow]:
    """Every file's samples, counts of equal rows summed (across its flush intervals).

    ``since`` (Unix time): only the counts flushed at or after it (``raytrace-kit stuck``'s
    recent samples).
    """
    rows: list[SampleRow] = []
    for path in paths:
        reader = SamplesReader(path, since=since)
        try:
            with path.open("rb") as handle:
                reader.feed(handle)
        except OSError:
            continue
        rows.extend(reader.rows())
    return rows


_COUNTS = b'{"k":"counts","t":'  # how the writer starts a counts record
_LOCALS = ".<locals>."  # in a nested function's qualified name: left out of frames' names


def _stamp(raw: bytes) -> float:
    """A counts record's ``t``, read in place."""
    return float(raw[len(_COUNTS) : raw.index(b",", len(_COUNTS))])


class SamplesReader:
    """One process's samples file read as it grows: its definitions, its counts summed.

    :func:`read_samples` feeds a file once; ``raytrace-kit top``'s reader feeds each
    file's new whole lines at each refresh (:mod:`.live_samples`).
    """

    def __init__(self, path: Path, *, since: float | None = None) -> None:
        self.since = since
        self.frames: dict[int, Frame] = {}
        self.stacks: dict[int, tuple[Frame, ...]] = {}
        self.threads: dict[int, str] = {}
        self.calls: dict[int, dict[str, Any]] = {}
        self.counts: Counter[tuple[Any, ...]] = Counter()
        self.hz, self.process = 100.0, path.stem.removeprefix("samples-")
        self.driver: str | None = None  # the driver's script, in a driver's file

    def feed(self, lines: Iterable[bytes]) -> None:
        """Take in whole lines, in the file's order; a torn or orphan record is skipped."""
        since = self.since
        for raw in lines:
            try:
                if since is not None and raw.startswith(_COUNTS) and _stamp(raw) < since:
                    continue  # counts from before the window, not decoded
                self._record(json.loads(raw))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line, or a record whose definitions were lost

    def _record(self, record: dict[str, Any]) -> None:
        kind = record["k"]
        if kind == "counts":
            if self.since is not None and float(record.get("t") or 0) < self.since:
                return
            calls, stacks, threads = self.calls, self.stacks, self.threads
            for stack, thread, call, waiting, count in record["rows"]:
                made = calls.get(call, {}) if call else {}
                key = (
                    stacks[stack], threads.get(thread, "?"), made.get("call_id"),
                    made.get("function"), made.get("actor_id"), bool(waiting),
                )  # fmt: skip
                self.counts[key] += count
        elif kind == "frame":
            name = record["name"].replace(_LOCALS, ".")  # f.<locals>.g: f.g, as py-spy's
            self.frames[record["id"]] = Frame(name, record["file"], record["line"])
        elif kind == "stack":
            self.stacks[record["id"]] = tuple(self.frames[i] for i in record["frames"])
        elif kind == "thread":
            self.threads[record["id"]] = record["name"]
        elif kind == "call":
            self.calls[record["id"]] = record
        elif kind == "process":
            self.hz = float(record.get("hz") or self.hz)
            self.process = f"{(record.get('node_id') or 'nonode')[:12]}/{record.get('pid')}"
            if record.get("role") == "driver":
                self.driver = str(record.get("script") or "?")

    def rows(self) -> list[SampleRow]:
        """The counts so far, one row per distinct sample."""
        hz, process, driver = self.hz, self.process, self.driver
        return [
            SampleRow(stack, process, thread, call_id, function, actor, waiting, n, n / hz, driver)
            for (stack, thread, call_id, function, actor, waiting), n in self.counts.items()
        ]


def select(
    rows: Iterable[SampleRow],
    *,
    function: str | None = None,
    call: str | None = None,
    node: str | None = None,
    idle: bool = False,
) -> list[SampleRow]:
    """The rows asked for: running only unless ``idle``; of one function, call or node.

    ``function`` matches the full name or a suffix after a dot (``crunch``,
    ``Model.step``); ``call`` and ``node`` match a prefix of the call's id, the node's id.
    """
    chosen = []
    for row in rows:
        if row.waiting and not idle:
            continue
        if function is not None and not _named(row.function, function):
            continue
        if call is not None and not (row.call_id or "").startswith(call):
            continue
        if node is not None and not row.process.startswith(node[:12]):
            continue
        chosen.append(row)
    return chosen


def _named(name: str | None, wanted: str) -> bool:
    return name is not None and (name == wanted or name.endswith("." + wanted))


_KIT = os.path.join(KIT_DIR, "")


def _is_users(frame: Frame) -> bool:
    """Not the standard library's (its `<frozen ...>` modules too), a package's, the kit's."""
    file = frame.file
    return not (
        in_stdlib(file)
        or file.startswith(("<frozen ", _KIT))
        or f"{os.sep}site-packages{os.sep}" in file
    )


def user_leaf(stack: tuple[Frame, ...]) -> Frame | None:
    """The innermost frame of the user's code (no stdlib, package or kit), else a package's.

    A stack without the user's code (Ray's worker importing a module) is named by its
    innermost frame of a package (``FunctionActorManager.load_actor_class``), not the
    standard library's (``_path_stat``); the leaf when it has none.
    """
    for frame in reversed(stack):
        if _is_users(frame):
            return frame
    for frame in reversed(stack):
        if not (in_stdlib(frame.file) or frame.file.startswith("<")):
            return frame
    return stack[-1] if stack else None


def from_users_code(stack: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """``stack`` from its outermost frame of the user's code on (Ray's worker loop cut off)."""
    for index, frame in enumerate(stack):
        if _is_users(frame):
            return stack[index:]
    return stack


def hottest_line(rows: Iterable[SampleRow]) -> tuple[Frame, int, int] | None:
    """The line most running samples of ``rows`` are at: ``(frame, its samples, all)``."""
    lines: Counter[tuple[str, int, str]] = Counter()
    total = 0
    for row in rows:
        if row.waiting:
            continue
        leaf = user_leaf(row.stack)
        total += row.count
        if leaf is not None:
            lines[leaf.file, leaf.line, leaf.name] += row.count
    if not lines:
        return None
    (file, line, name), count = lines.most_common(1)[0]
    return Frame(name, file, line), count, total


def hottest_lines(rows: Iterable[SampleRow], functions: Iterable[str]) -> dict[str, str]:
    """For each function with running samples: ``68% of crunch's running samples at f.py:41``."""
    by_function: dict[str, list[SampleRow]] = {}
    for row in rows:
        if row.function is not None and not row.waiting:
            by_function.setdefault(row.function, []).append(row)
    said = {}
    for function in functions:
        found = hottest_line(by_function.get(function, ()))
        if found is None:
            continue
        frame, count, total = found
        short = function.rsplit(".", 1)[-1]
        said[function] = (
            f"{count / total:.0%} of {short}'s running samples at "
            f"{Path(frame.file).name}:{frame.line}"
        )
    return said


def add_hot_lines(slowest: list[dict[str, Any]], rows: list[SampleRow]) -> None:
    """Give the report's slowest functions their ``hot_line``, where the run was sampled."""
    if not rows or not slowest:
        return
    said = hottest_lines(rows, [row["function"] for row in slowest])
    for row in slowest:
        if row["function"] in said:
            row["hot_line"] = said[row["function"]]
