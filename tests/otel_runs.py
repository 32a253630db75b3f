"""Runs of a known shape for the OpenTelemetry export's tests, written as the kit writes.

Each process's file is written by the kit's own encoder and writer; calls get the task
ids, attempts, parents and times a test chooses, and may log (``get_logger()``'s lines)
and be submitted (``call.submit`` lines, in the submitting process's file).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from raytrace_kit._output import encode, paths, submissions
from raytrace_kit._output.writer import EventWriter
from raytrace_kit._process import ProcessIdentity

ORIGIN = datetime(2026, 11, 22, 4, 2, tzinfo=timezone.utc).timestamp()  # long gone


def stamp(seconds: float) -> str:
    """The timestamp ``seconds`` after the run's origin, as the kit writes it."""
    moment = datetime.fromtimestamp(ORIGIN + seconds, timezone.utc)
    return moment.isoformat(timespec="microseconds")


def ns(seconds: float) -> int:
    """The same time in nanoseconds since the epoch (microseconds exact)."""
    return (round(ORIGIN * 1e6) + round(seconds * 1e6)) * 1000


def task_of(name: str) -> str:
    """A task id in Ray's format, made from a short name."""
    return name.encode().hex().ljust(40, "f")[:40] + "01000000"


class Process:
    """One worker process's event file: calls with chosen ids, times, parents, attempts."""

    def __init__(self, directory: Path, pid: int, node: str = "ab" * 28) -> None:
        self.identity = ProcessIdentity("01000000", node, f"{pid:056x}", pid, is_worker=True)
        self.path = directory / paths.event_file_name(node, pid)
        self.writer = EventWriter(self.path)
        self.members: dict[str, str] = {}

    def _write(self, line: bytes, at: float) -> None:
        assert line[:14] == b'{"timestamp":"'
        self.writer.write(line[:14] + stamp(at).encode() + line[46:])

    def start(
        self,
        call_id: str,
        function: str,
        at: float,
        *,
        task: str | None = None,
        parent: tuple[str, str] | None = None,
        attempt: int = 0,
        kind: str = "task",
    ) -> None:
        """A ``call.start``; ``parent`` is (call id, task id) of the submitting call."""
        members = self.members[call_id] = encode.call_members(
            call_id=call_id,
            spec_fragment=encode.members({"function": function, "kind": kind}),
            mode="ray",
            task_id=task or task_of(call_id),
            actor_id=None,
            identity=self.identity,
            attempt=attempt,
            task_name=function.rsplit(".", 1)[-1],
            parent=f"{parent[0]}/{parent[1]}" if parent else None,
        )
        tail = encode.memory_members((100 * 2**20, 50 * 2**20, 100 * 2**20))
        self._write(encode.call_line("call.start", "info", members, tail), at)

    def end(self, call_id: str, at: float, took: float, error: BaseException | None = None) -> None:
        """The ``call.end`` of a started call."""
        tail = encode.end_members(
            took,
            error,
            took * 0.5,
            rss_start=100 * 2**20,
            figures=(101 * 2**20, 51 * 2**20, 101 * 2**20),
            process_cpu_s=took * 0.6,
        )
        level = "error" if error else "info"
        self._write(encode.call_line("call.end", level, self.members.pop(call_id), tail), at)

    def call(
        self,
        call_id: str,
        function: str,
        begun: float,
        ended: float,
        error: BaseException | None = None,
        **start: Any,
    ) -> None:
        """A whole call, with nothing of this process between its start and its end."""
        self.start(call_id, function, begun, **start)
        self.end(call_id, ended, ended - begun, error)

    def log(self, call_id: str, event: str, at: float, **fields: Any) -> None:
        """A ``get_logger()`` event written during a call (its fields, then the user's)."""
        context = {"call_id": call_id, "function": "f", "node_id": self.identity.node_id}
        line = encode.event_line(
            {"timestamp": stamp(at), "level": "info", "event": event, **context, **fields}
        )
        self.writer.write(line)

    def stuck(self, call_id: str, at: float, running_s: float) -> None:
        """A ``call.stuck`` of a running call (it ran past its ``stuck_after``) in ray.get."""
        tail = encode.stuck_members(
            running_s, 60.0, 1, "MainThread",
            [("/app/job.py", 12, "root", "ray.get(refs)")],
            {"what": "ray.get", "refs": 1, "task_ids": [task_of("b000000000000001")]},
        )  # fmt: skip
        self._write(encode.call_line("call.stuck", "warning", self.members[call_id], tail), at)

    def submit(self, task: str, function: str, at: float, parent: str | None = None) -> None:
        """A ``call.submit`` line: this process submitted ``task`` at ``at``.

        ``parent`` is the submitting call's id (``None``: the driver's own code).
        """
        prefix = submissions.submit_prefix(function, "task", {"CPU": 1.0}, None)
        token = f"{parent}/{task_of(parent)}" if parent else None
        line = submissions.submit_line(
            ORIGIN + at, prefix, task, None, token, self.identity, "job.py:12", None
        )
        self.writer.write(line)

    def close(self) -> None:
        self.writer.close()


def _fail(message: str) -> None:
    raise ValueError(message)


def failure(message: str) -> BaseException:
    """A raised ``ValueError`` with its traceback."""
    try:
        _fail(message)
    except ValueError as exc:
        return exc
    raise AssertionError  # unreachable: _fail raises
