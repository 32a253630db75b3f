"""``--follow``: spans sent as calls end, from the event files of a run on this machine.

Every half second the directory's event files are listed and each is read from where the
last round stopped (files are known by inode, so a rotated file is read to its end under
its new name). A call's span leaves once its end has been read, a round has passed (so a
late ``call.submit`` still gives its queue time) and its chain of parents is known to its
root (so its trace id is its root's); a parent never recorded holds it ten rounds at most.
A call without an end becomes an interrupted span once its process is gone here two
rounds in a row. Nodes on other machines write where this cannot read: following them
needs a reader on each node (docs/otel.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.explain.linking import deaths_of, still_running
from raytrace_kit._reports.otel.spans import Interruption, Resources, Span, nanoseconds
from raytrace_kit._reports.otel.stream import Logged
from raytrace_kit._reports.otel.tree import Tree, is_submission
from raytrace_kit._reports.reading.calls import interrupted, join_start
from raytrace_kit._reports.reading.session import Session
from raytrace_kit._reports.reading.session_list import EVENT_GLOB

__all__ = ["GRACE_ROUNDS", "Follower", "follow"]

GRACE_ROUNDS = 10  # rounds a span waits for a parent that was never recorded
_BLOCK = 4 * 2**20


class _Start(msgspec.Struct, gc=False):
    call_id: str = ""
    parent_call_id: str | None = None
    parent_task_id: str | None = None


_START = msgspec.json.Decoder(_Start).decode
_END = msgspec.json.Decoder(Call).decode


class _Tail:
    """Where the reading of one file (one inode) stands."""

    __slots__ = ("offset", "rest", "stem")

    def __init__(self, stem: str) -> None:
        self.offset = 0
        self.rest = b""
        self.stem = stem


class _Held(msgspec.Struct, gc=False):
    call: Call
    lines: list[bytes]
    dropped: int
    read: int  # the round its end was read in


class Follower:
    """Spans of a directory's event files, one round of reading at a time.

    Args:
        session: The run (its directory is listed each round; its Ray logs give deaths).
        resources: Where each process's resource comes from.
    """

    def __init__(self, session: Session, resources: Resources) -> None:
        self.session = session
        root = session.root
        kit = root / "logs" / "raytrace_kit"  # a Ray session directory: where open_session reads
        self.directory = kit if kit.is_dir() else root if root.is_dir() else root.parent
        self.single = root if root.is_file() else None
        self.resources = resources
        self.tree = Tree()
        self.tree.follow()
        self.logged = Logged()
        self.round = 0
        self._tails: dict[tuple[int, int], _Tail] = {}
        self._starts: dict[str, tuple[bytes, str]] = {}  # call id -> its line, its process
        self._heard: dict[str, str] = {}  # process (file stem) -> its last line's time
        self._held: list[_Held] = []
        self._gone: set[str] = set()  # calls whose process was gone last round

    # --- reading ---

    def _files(self) -> list[Path]:
        if self.single is not None:
            return [self.single]
        try:
            found = list(self.directory.rglob(EVENT_GLOB))
        except OSError:
            return []
        # Older rotations first: a call's start is read before its end.
        return sorted(found, key=lambda p: (p.parent, _stem(p.name), -_number(p.name)))

    def _read(self) -> None:
        for path in self._files():
            try:
                status = path.stat()
            except OSError:
                continue  # rotated away or removed while listed: next round
            tail = self._tails.setdefault((status.st_dev, status.st_ino), _Tail(_stem(path.name)))
            if status.st_size <= tail.offset:
                continue
            try:
                with path.open("rb") as handle:
                    handle.seek(tail.offset)
                    while block := handle.read(_BLOCK):
                        tail.offset += len(block)
                        lines = (tail.rest + block).split(b"\n")
                        tail.rest = lines.pop()
                        for raw in lines:
                            self._line(raw, tail.stem)
            except OSError:
                continue

    def _line(self, raw: bytes, stem: str) -> None:
        if raw.startswith(b'{"timestamp":"'):
            self._heard[stem] = raw[14:46].decode("ascii", "replace")
        at = raw.find(b'"event":"call.', 0, 120)
        if at < 0:
            at = raw.find(b'"event": "call.')
            at = at + 15 if at >= 0 else -1
        else:
            at += 14
        try:
            if at >= 0 and raw.startswith(b'start"', at):
                begun = _START(raw)
                self._starts[begun.call_id] = (raw, stem)
                self.tree.add(begun.call_id, begun.parent_call_id, begun.parent_task_id)
            elif at >= 0 and raw.startswith(b'end"', at):
                call = _END(raw)
                started = self._starts.pop(call.call_id, None)
                if started is not None:
                    join_start(call, started[0])
                self.tree.add(call.call_id, call.parent_call_id, call.parent_task_id)
                lines, dropped = self.logged.take(call.call_id)
                self._held.append(_Held(call, lines, dropped, self.round))
            elif is_submission(raw):
                self.tree.add_submission(raw)
            else:
                self.logged(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return  # a line cut short by a killed process

    # --- spans ---

    def _span(self, held: _Held, interruption: Interruption | None = None) -> Span:
        return self.tree.span(held.call, self.resources, (held.lines, held.dropped), interruption)

    def poll(self) -> list[Span]:
        """Read what was written since the last round; the spans ready to leave."""
        self.round += 1
        self._read()
        ready: list[Span] = []
        waiting: list[_Held] = []
        for held in self._held:
            age = self.round - held.read
            if age >= 1 and (self.tree.complete(held.call) or age >= GRACE_ROUNDS):
                ready.append(self._span(held))
            else:
                waiting.append(held)
        self._held = waiting
        ready.extend(self._interrupted(final=False))
        return ready

    def _interrupted(self, *, final: bool) -> Iterator[Span]:
        """Calls without an end whose process is gone (two rounds in a row, or at the end)."""
        gone: list[tuple[Call, str]] = []
        now_gone: set[str] = set()
        for call_id, (raw, stem) in list(self._starts.items()):
            call = interrupted(raw)
            if call is None:
                del self._starts[call_id]
                continue
            if still_running(call.pid, call.started):
                continue
            if final or call_id in self._gone:
                gone.append((call, stem))
                del self._starts[call_id]
            else:
                now_gone.add(call_id)
        self._gone = now_gone
        if not gone:
            return
        deaths = deaths_of([call for call, _ in gone], self.session)
        for call, stem in gone:
            lines, dropped = self.logged.take(call.call_id)
            heard = self._heard.get(stem)
            last = _ns(heard) if heard else 0
            death = deaths.get(call.call_id)
            cause = death.cause if death is not None else ""
            yield self._span(_Held(call, lines, dropped, self.round), Interruption(last, cause))

    def finish(self, *, ended: bool) -> list[Span]:
        """The spans still held, after a last read; the interrupted ones if the run ended.

        Args:
            ended: The run is over: a call without an end will never have one.
        """
        self.round += 1
        self._read()
        spans = [self._span(held) for held in self._held]
        self._held = []
        if ended:
            spans.extend(self._interrupted(final=True))
        return spans

    @property
    def running(self) -> int:
        """Calls started and not ended (nor known interrupted)."""
        return len(self._starts)


def follow(
    follower: Follower,
    deliver: Callable[[list[Span]], None],
    live: Callable[[], bool],
    wait: Callable[[float], object],
    interval_s: float = 0.5,
) -> None:
    """Poll until the run ends (``live()`` false) or ``KeyboardInterrupt``; deliver spans.

    The run's end is checked every few rounds; after it, one last read and the
    interrupted calls. On ``KeyboardInterrupt`` the held spans are delivered, not the
    calls still running.
    """
    checked = 0
    try:
        while True:
            spans = follower.poll()
            if spans:
                deliver(spans)
            checked += 1
            if checked % 4 == 0 and not live():
                deliver(follower.finish(ended=True))
                return
            wait(interval_s)
    except KeyboardInterrupt:
        deliver(follower.finish(ended=False))


def _stem(name: str) -> str:
    base = name.removesuffix(".jsonl")
    head, _, number = base.rpartition(".")
    return head if number.isdigit() else base


def _number(name: str) -> int:
    _, _, number = name.removesuffix(".jsonl").rpartition(".")
    return int(number) if number.isdigit() else 0


def _ns(stamp: str) -> int:
    try:
        return nanoseconds(stamp)
    except ValueError:
        return 0
