"""One reader per node directory of the connected cluster: a small actor that reads where files are.

``report(address=...)``, ``raytrace-kit top`` and ``tail`` ask each node's reader and
merge the answers; the event files never travel. A reader is an actor, not a task,
because it keeps state between questions: a report's tally between its three questions,
a live view's offsets and aggregates between refreshes. Each is placed on its node with
hard node affinity and asks for no CPU (it runs even when the job holds every CPU), is
not detached (it ends with the process that made it, if :meth:`Readers.close` was not
called), opens no port of its own, and is the kit's own (``raytrace-kit run`` leaves it
alone). Nodes of one machine that share a directory get one reader, as ``collect()``
copies such a directory once; the readers are ordered as ``collect()`` names its folders,
so merges read in the order a report of the collected files reads.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._driver.collect import _same_directory, unanswered
from raytrace_kit._output import paths
from raytrace_kit._reports.cluster import NodeReport
from raytrace_kit._reports.live import RECORD_FILE, Cursor, LiveSamples, LiveTally
from raytrace_kit._reports.stuck import user_where
from raytrace_kit._worker import stack_server
from raytrace_kit.exceptions import RaytraceKitError

__all__ = ["NodeReader", "ReaderError", "Readers"]

_WHERE_ASKED = 5  # processes asked per refresh where their oldest call is (live stacks)
_WHERE_AFTER_S = 1.0  # calls younger than this are not asked about
_ANSWER_S = 0.5
_FORGET_S = 300.0  # a process silent this long that runs nothing leaves the view


class ReaderError(RaytraceKitError, RuntimeError):
    """A node's reader could not be started or did not answer."""


class NodeReader:
    """On one node: its directory of event files, read for a report, a live view, a tail."""

    def __init__(self) -> None:
        self.root = paths.log_dir()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.report: NodeReport | None = None
        self.live: LiveTally | None = None
        self.samples: LiveSamples | None = None
        self.cursor: Cursor | None = None
        self.clock: tuple[float, float] | None = None
        self.shipped: list[int] = []

    def where(self) -> dict[str, Any]:
        """This node's id and the directory its reader reads."""
        return {"node_id": self.node_id, "root": str(self.root)}

    # --- a report: three questions (_reports/cluster/partial.py) ---

    def prepare(self) -> dict[str, Any]:
        self.report = NodeReport([self.root], paths.session_dir() / "logs")
        return self.report.prepare()

    def tally(self, *arguments: Any) -> dict[str, Any]:
        assert self.report is not None  # noqa: S101 -- prepare() came first
        return self.report.tally(*arguments)

    def split(self, offset: int, parts: int) -> list[Any]:
        """The halves that did not join here, one part per node, put in this node's store.

        Only the references travel to the caller; each node's reader fetches its part
        from here (``join``).
        """
        assert self.report is not None  # noqa: S101 -- tally() came first
        pieces = self.report.split(offset, parts)
        self.shipped = [len(pickle.dumps(piece)) for piece in pieces]
        return [ray.put(piece) for piece in pieces]

    def join(self, refs: list[Any]) -> dict[str, Any]:
        """This node's part of the join, from the parts every node put for it.

        The ends it found of each node's driver's calls are put here too, for that node.
        """
        assert self.report is not None  # noqa: S101 -- split() came first
        answer = self.report.join(ray.get(refs))
        self.shipped += [len(pickle.dumps(piece)) for piece in answer["back"]]
        answer["back"] = [ray.put(piece) for piece in answer["back"]]
        return answer

    def ends(self, refs: list[Any], shared: list[str]) -> dict[str, Any]:
        """The driver's lines read here, judged with the ends the nodes put for it."""
        assert self.report is not None  # noqa: S101 -- join() came first
        return self.report.ends(ray.get(refs), shared)

    def pieces(self) -> list[int]:
        """The bytes of each part :meth:`split` and :meth:`join` made (a benchmark's figure).

        The first as many as there are nodes are :meth:`split`'s, then :meth:`join`'s.
        """
        return self.shipped

    def details(self, *arguments: Any) -> dict[str, Any]:
        assert self.report is not None  # noqa: S101 -- tally() came first
        answer = self.report.details(*arguments)
        self.report = None  # the last question: its memory goes
        return answer

    # --- a live view: one look per refresh ---

    def look(self) -> dict[str, Any]:
        """What is new here since the last look, as the live view's node state."""
        if self.live is None:
            self.live, self.cursor = LiveTally(), Cursor(self.root)
        assert self.cursor is not None  # noqa: S101 -- made with live
        live = self.live
        for name, lines in self.cursor.read():
            live.take(lines, name)
        live.reap()
        state = live.snapshot()
        live.forget_processes(_stamp_before(_FORGET_S))
        _ask_where(state["oldest"], live)
        if self.samples is None:
            self.samples = LiveSamples(self.root)
        state["hot_lines"] = self.samples.look()  # the samples files', if sampled
        state["node_id"] = self.node_id
        state["behind"] = self.cursor.behind
        state["cpu_share"] = self._cpu_share()
        return state

    def _cpu_share(self) -> float | None:
        """This reader's CPU time over the wall time since its last look (one core = 1.0).

        ``None`` at the first look (it includes the reader's start).
        """
        now = (time.process_time(), time.monotonic())
        before, self.clock = self.clock, now
        if before is None or now[1] <= before[1]:
            return None
        return (now[0] - before[0]) / (now[1] - before[1])

    def follow(self, function: str | None, status: str | None) -> list[tuple[str, list[bytes]]]:
        """The event lines written here since the last call (from now, the first time)."""
        if self.cursor is None:
            self.cursor = Cursor(self.root, from_end=True, files=RECORD_FILE)
        found = []
        for name, lines in self.cursor.read():
            kept = [line for line in lines if _wanted(line, function, status)]
            if kept:
                found.append((name, kept))
        return found


def _stamp_before(seconds: float) -> str:
    from raytrace_kit._output import encode  # noqa: PLC0415

    return encode.stamp(time.time() - seconds)


def _wanted(line: bytes, function: str | None, status: str | None) -> bool:
    """Whether a line passes ``tail``'s filters (a byte search; the caller decodes)."""
    if function is not None and f'"function":"{function}"'.encode() not in line:
        dotted = f'.{function}"'.encode()
        if dotted not in line or b'"function":"' not in line:
            return False
    if status is not None:
        if status == "interrupted":
            return False  # known only when the call never ends: see `events --status`
        return f'"status":"{status}"'.encode() in line
    return True


def _ask_where(oldest: list[dict[str, Any]], live: LiveTally) -> None:
    """The line each of the oldest calls is at now, from its process's request pipe."""
    pids = []
    for call in oldest:
        old = call["where"] is None and call["running_s"] >= _WHERE_AFTER_S
        if old and call["pid"] and call["pid"] not in pids:
            pids.append(call["pid"])
    if not pids:
        return
    fifos = dict(stack_server.fifos())
    asked = [(pid, fifos[pid]) for pid in pids[:_WHERE_ASKED] if pid in fifos]
    found: dict[str, str] = {}

    def ask(item: tuple[int, Path]) -> None:
        with contextlib.suppress(Exception):  # a process busy in C code: no line this time
            answer = stack_server.ask(item[1], {"kind": "snapshot"}, _ANSWER_S)
            for call in answer.get("calls", []):
                where = user_where(call.get("stack") or [])  # as stuck names it
                if where is not None:
                    found[call["call_id"]] = where

    if asked:
        with ThreadPoolExecutor(max_workers=len(asked)) as pool:
            list(pool.map(ask, asked))
    for call in oldest:
        where = found.get(call["call_id"])
        if where is not None:
            call["where"] = where
            entry = live.running.get(call["call_id"])
            if entry is not None:
                entry[6] = where


@_registry.cleared_on_reset
@functools.cache
def _reader_class() -> Any:
    remote = _ray_compat.ray_remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    return _ray_compat.mark_kit_remote(remote(NodeReader))


class Readers:
    """The readers of the connected cluster's node directories (see the module).

    ``measure``: count the bytes of every question and answer (``moved``), for benchmarks.
    """

    def __init__(self, *, timeout: float = 60.0, measure: bool = False) -> None:
        self.timeout = timeout
        self.measure = measure
        self.moved = 0
        self.moved_by: dict[str, int] = {}  # by question
        self.problems: list[str] = []
        self.actors: list[Any] = []
        self.nodes: list[str] = []
        reader = _reader_class()
        started: list[tuple[dict[str, Any], Any]] = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            down = unanswered(node)
            if down is not None:
                self.problems.append(f"node {node['NodeID'][:12]}: {down}")
                continue
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            started.append((node, reader.options(scheduling_strategy=strategy).remote()))
        listed = []
        for node, actor in started:
            try:
                where = ray.get(actor.where.remote(), timeout=timeout)
            except Exception as exc:  # a node that cannot start its reader is named
                self.problems.append(
                    f"node {node['NodeID'][:12]}: {type(exc).__name__}: {exc}"[:300]
                )
                _kill(actor)
                continue
            listed.append({"node": node, "listing": where, "actor": actor})
        shared = _same_directory(listed)
        owners = sorted(
            (item for item in listed if item["node"]["NodeID"] not in shared),
            key=lambda item: item["node"]["NodeID"][:12],
        )
        for item in listed:
            if item["node"]["NodeID"] in shared:
                _kill(item["actor"])
        self.actors = [item["actor"] for item in owners]
        self.nodes = [item["node"]["NodeID"] for item in owners]
        if not self.actors:
            msg = "no node's reader started: " + "; ".join(self.problems or ["no node alive"])
            if "references to the actor were removed" in msg:
                msg += (
                    ". The cluster dropped them as soon as they were made: if it runs "
                    "without token authentication while this machine has a Ray token "
                    "(~/.ray/auth_token, sent when attaching, as Ray's own command line "
                    "does), set RAY_AUTH_MODE=disabled in this shell"
                )
            raise ReaderError(msg)

    def __len__(self) -> int:
        return len(self.actors)

    def ask(
        self, method: str, arguments: list[tuple[Any, ...]], *, tolerate: bool = False
    ) -> list[Any]:
        """Ask every reader ``method`` with its arguments; their answers, in order.

        ``tolerate``: a reader that fails (its node died) is named in :attr:`problems` and
        left out from then on (a live view goes on with the others).

        Raises:
            ReaderError: A reader failed or did not answer within the timeout (and not
                ``tolerate``, or none is left).
        """
        refs = [
            getattr(a, method).remote(*args) for a, args in zip(self.actors, arguments, strict=True)
        ]
        answers, failed = [], []
        for index, (node, ref) in enumerate(zip(self.nodes, refs, strict=True)):
            try:
                answers.append(ray.get(ref, timeout=self.timeout))
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                msg = f"the reader of node {node[:12]} did not answer {method}: {why}"[:500]
                if not tolerate:
                    raise ReaderError(msg) from exc
                self.problems.append(msg)
                failed.append(index)
        for index in reversed(failed):
            _kill(self.actors.pop(index))
            self.nodes.pop(index)
        if failed and not self.actors:
            raise ReaderError("; ".join(self.problems[-len(failed) :]))
        if self.measure:
            moved = sum(len(pickle.dumps(a)) for a in answers)
            moved += sum(len(pickle.dumps(args)) for args in arguments)
            self.moved += moved
            self.moved_by[method] = self.moved_by.get(method, 0) + moved
        return answers

    def close(self) -> None:
        """End the readers (they also end with this process)."""
        for actor in self.actors:
            _kill(actor)
        self.actors = []


def _kill(actor: Any) -> None:
    with contextlib.suppress(Exception):
        ray.kill(actor, no_restart=True)


def cluster_name() -> str:
    """How the connected cluster is named in what the kit prints: its GCS address."""
    return f"cluster {ray.get_runtime_context().gcs_address}"
