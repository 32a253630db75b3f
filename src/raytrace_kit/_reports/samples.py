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

__all__ = [
    "SAMPLES_GLOB",
    "Frame",
    "SampleRow",
    "add_hot_lines",
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


def read_samples(paths: Iterable[Path]) -> list[SampleRow]:
    """Every file's samples, counts of equal rows summed (across its flush intervals)."""
    rows: list[SampleRow] = []
    for path in paths:
        rows.extend(_read_file(path))
    return rows


def _read_file(path: Path) -> list[SampleRow]:
    frames: dict[int, Frame] = {}
    stacks: dict[int, tuple[Frame, ...]] = {}
    threads: dict[int, str] = {}
    calls: dict[int, dict[str, Any]] = {}
    counts: Counter[tuple[Any, ...]] = Counter()
    hz, process = 100.0, path.stem.removeprefix("samples-")
    try:
        handle = path.open("rb")
    except OSError:
        return []
    with handle:
        for raw in handle:
            try:
                record = json.loads(raw)
                kind = record["k"]
                if kind == "counts":
                    for stack, thread, call, waiting, count in record["rows"]:
                        made = calls.get(call, {}) if call else {}
                        key = (
                            stacks[stack], threads.get(thread, "?"), made.get("call_id"),
                            made.get("function"), made.get("actor_id"), bool(waiting),
                        )  # fmt: skip
                        counts[key] += count
                elif kind == "frame":
                    frames[record["id"]] = Frame(record["name"], record["file"], record["line"])
                elif kind == "stack":
                    stacks[record["id"]] = tuple(frames[i] for i in record["frames"])
                elif kind == "thread":
                    threads[record["id"]] = record["name"]
                elif kind == "call":
                    calls[record["id"]] = record
                elif kind == "process":
                    hz = float(record.get("hz") or hz)
                    process = f"{(record.get('node_id') or 'nonode')[:12]}/{record.get('pid')}"
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line, or a record whose definitions were lost
    return [
        SampleRow(stack, process, thread, call_id, function, actor, waiting, n, n / hz)
        for (stack, thread, call_id, function, actor, waiting), n in counts.items()
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


def _is_users(frame: Frame) -> bool:
    return not (in_stdlib(frame.file) or f"{os.sep}site-packages{os.sep}" in frame.file)


def user_leaf(stack: tuple[Frame, ...]) -> Frame | None:
    """The innermost frame of the user's code (not the stdlib's nor a package's), else the leaf."""
    for frame in reversed(stack):
        if _is_users(frame):
            return frame
    return stack[-1] if stack else None


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


def add_hot_lines(slowest: list[dict[str, Any]], files: list[Path]) -> None:
    """Give the report's slowest functions their ``hot_line``, where the run was sampled."""
    if not files or not slowest:
        return
    said = hottest_lines(read_samples(files), [row["function"] for row in slowest])
    for row in slowest:
        if row["function"] in said:
            row["hot_line"] = said[row["function"]]
