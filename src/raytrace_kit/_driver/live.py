"""``top()`` and ``tail()``: a running cluster watched live, through one reader per node.

Each refresh asks every node's reader (``readers.py``) for what is new in its files
since the last refresh; the reader keeps its offsets and aggregates between refreshes,
so a refresh reads only the bytes written since, and only aggregates travel
(``_reports/live/aggregates.py``, merged by ``_reports/live/top_merge.py``). ``tail``
ships the new lines themselves (filtered on the node) and prints them in order of time,
each process's in the order it wrote them.

In a terminal the view redraws in place (rich, the alternate screen) until ``q`` or
Ctrl-C, which restore the terminal; in a notebook it redraws in the cell's output; with
``once`` (or no terminal) it is one snapshot.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import select
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

import msgspec
import ray

from raytrace_kit._driver import readers
from raytrace_kit._driver.attach import attached
from raytrace_kit._output.lines import readable
from raytrace_kit._reports.live import TopView, merge, renderable
from raytrace_kit._reports.reading import flush_own
from raytrace_kit.exceptions import InvalidValueError, UsageError

__all__ = ["Watch", "connected", "tail", "top"]


class Watch:
    """The live view's refreshes: the nodes' readers asked, their answers merged."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.readers = readers.Readers(timeout=timeout)
        self.source = readers.cluster_name()
        self.view: TopView | None = None

    def refresh(self) -> TopView:
        flush_own()  # this process's own submission records, if it submitted any
        states = self.readers.ask("look", [()] * len(self.readers), tolerate=True)
        self.view = merge(self.source, states, self.view, self.readers.problems)
        return self.view

    def close(self) -> None:
        self.readers.close()


@contextlib.contextmanager
def connected(address: str | None, what: str) -> Iterator[None]:
    """Ray connected: as it is, or attached to ``address`` for the block's time.

    Raises:
        UsageError: Ray is not initialized and no ``address`` was given.
    """
    if ray.is_initialized():
        yield
        return
    if address is None:
        msg = (
            f"{what} watches a running Ray cluster, and Ray is not initialized here. Call "
            "ray.init(address=...) first, pass address='auto' (or HOST:PORT), or use "
            f"`raytrace-kit {what.rstrip('()')} --address HOST:PORT` from a shell."
        )
        raise UsageError(msg)
    with attached(address):
        yield


def _check(interval: float) -> None:
    if not interval > 0:
        msg = f"interval={interval!r}: give a number of seconds above 0 (1.0 by default)"
        raise InvalidValueError(msg)


def top(
    *,
    interval: float = 1.0,
    duration: float | None = None,
    once: bool = False,
    address: str | None = None,
) -> TopView | None:
    """Watch the connected cluster live: per function, calls running, pending, done, failed.

    The view shows each function's calls running, pending (submitted, not started),
    done and failed with their median and 95th percentile durations; the oldest calls in
    flight with their age, node and the line they are at; stragglers (calls far beyond
    their function's median); the latest failures with their error; per node its
    processes and their memory; events per second. Read through Ray by one small reader
    per node (no dashboard, no port opened).

    In a notebook it redraws in the cell's output; in a terminal in place, until ``q``
    or Ctrl-C; elsewhere (or with ``once``) it returns one snapshot.

    Args:
        interval: Seconds between refreshes.
        duration: Stop after this many seconds (``None``: until interrupted).
        once: Return one snapshot (printable, shown in notebooks, ``to_dict()``).
        address: Attach to this cluster (``"auto"`` or ``HOST:PORT``) if Ray is not
            initialized here.

    Returns:
        The snapshot with ``once``; otherwise ``None`` once the view stops.

    Raises:
        UsageError: Ray is not initialized and no ``address`` was given.
        InvalidValueError: ``interval`` is not above 0.

    Example:
        >>> print(raytrace_kit.top(once=True))  # doctest: +SKIP
    """
    _check(interval)
    with connected(address, "top()"):
        watch = Watch()
        try:
            if once:
                return watch.refresh()
            if _notebook():
                _in_notebook(watch, interval, duration)
            else:
                terminal(watch, interval, duration)
        finally:
            watch.close()
    return None


def _notebook() -> bool:
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython  # noqa: PLC0415

    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _in_notebook(watch: Watch, interval: float, duration: float | None) -> None:
    from IPython.display import display  # noqa: PLC0415 -- only in a notebook

    handle = display(watch.refresh(), display_id=True)  # type: ignore[no-untyped-call]
    ends = None if duration is None else time.monotonic() + duration
    with contextlib.suppress(KeyboardInterrupt):  # the kernel's interrupt stops the view
        while ends is None or time.monotonic() < ends:
            time.sleep(interval)
            handle.update(watch.refresh())


def terminal(watch: Watch, interval: float, duration: float | None) -> None:
    """Redraw the view in this terminal until ``q``, Ctrl-C or ``duration``; restore it."""
    from rich.console import Console  # noqa: PLC0415
    from rich.live import Live  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    console = Console()
    ends = None if duration is None else time.monotonic() + duration
    with (
        _keys(sys.stdin) as key,
        Live(Text("starting a reader on each node..."), console=console, screen=True,
             auto_refresh=False) as live,
        contextlib.suppress(KeyboardInterrupt),  # Ctrl-C: leave as q does, restored
    ):  # fmt: skip
        while ends is None or time.monotonic() < ends:
            live.update(renderable(watch.refresh()), refresh=True)
            if key(interval) == "q":
                break


@contextlib.contextmanager
def _keys(stream: IO[str]) -> Iterator[Callable[[float], str | None]]:
    """The terminal in cbreak mode (keys without Enter, Ctrl-C still a signal); restored after.

    Yields a function that waits up to a number of seconds for a key and returns it.
    """
    try:
        import termios  # noqa: PLC0415 -- POSIX only
        import tty  # noqa: PLC0415

        descriptor = stream.fileno()
        saved = termios.tcgetattr(descriptor)
    except (ImportError, OSError, ValueError):  # not a terminal: time passes, no keys

        def sleep(seconds: float) -> str | None:
            time.sleep(seconds)
            return None

        yield sleep
        return

    def read(seconds: float) -> str | None:
        ready, _, _ = select.select([descriptor], [], [], seconds)
        if not ready:
            return None
        return stream.read(1).lower()

    tty.setcbreak(descriptor)
    try:
        yield read
    finally:
        termios.tcsetattr(descriptor, termios.TCSADRAIN, saved)


def tail(
    *,
    function: str | None = None,
    status: str | None = None,
    raw: bool = False,
    interval: float = 0.5,
    out: IO[str] | None = None,
    until: threading.Event | None = None,
) -> None:
    """Print the events of every node as they are written, until Ctrl-C (or ``duration``).

    One readable line per event (as ``raytrace-kit events`` prints them), or the JSON
    line as written with ``raw``; in order of time, each process's in its own order.
    Ray must be connected.

    Args:
        function: Only this function's events (or a suffix of its name after a dot).
        status: Only ``call.end`` events of this status (``ok``, ``error``).
        raw: The JSON lines as written.
        interval: Seconds between two looks at the nodes.
        out: Where to print (stdout).
        until: Stop once this is set (another thread's say).
    """
    _check(interval)
    out = out or sys.stdout
    reading = readers.Readers()
    try:
        with contextlib.suppress(KeyboardInterrupt):
            while until is None or not until.is_set():
                answers = reading.ask("follow", [(function, status)] * len(reading), tolerate=True)
                for line, event in _in_order(answers):
                    if _matches(event, function, status):
                        out.write(
                            (line.decode("utf-8", "replace") if raw else readable(event)) + "\n"
                        )
                out.flush()
                time.sleep(interval)
    finally:
        reading.close()


_DECODE = msgspec.json.Decoder(dict[str, Any]).decode


def _in_order(
    answers: list[list[tuple[str, list[bytes]]]],
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Each file's lines decoded, merged by time; a file's own order is kept."""
    streams = []
    for answer in answers:
        for _, lines in answer:
            events = []
            for line in lines:
                with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                    events.append((line, _DECODE(line)))
            streams.append(events)
    yield from heapq.merge(*streams, key=lambda item: str(item[1].get("timestamp", "")))


def _matches(event: dict[str, Any], function: str | None, status: str | None) -> bool:
    if function is not None:
        name = str(event.get("function"))
        if name != function and not name.endswith("." + function):
            return False
    return status is None or (event.get("event") == "call.end" and event.get("status") == status)


def dumps(view: TopView) -> str:
    """A snapshot as JSON (``--json``)."""
    return json.dumps(view.to_dict(), indent=1, default=str)
