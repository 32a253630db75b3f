"""What tests share besides fixtures: the Ray instance, the current test's events, and more.

Fixtures are in the conftest files. Here: starting the shared Ray instance, the events of
the current test, sockets and HTML tables as a user sees them, and local mode's comparison
with plain Ray (the outcome of a body, and :class:`AgainstPlainRay` for tables of rows).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar
from xml.etree import ElementTree

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable, local_mode

# Whether Ray can say a task's name in the task (Ray 2.41 and later): the events' task_name
# is null on Ray 2.40.
TASK_NAMES = hasattr(ray.runtime_context.RuntimeContext, "get_task_name")


def run_cli(*arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``python -m raytrace_kit ARGUMENTS`` as a user runs it: a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "raytrace_kit", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# `python -m raytrace_kit`, with Ctrl-C as a terminal gives it: a suite started from a
# shell's background job (`.ci/run &`) inherits SIGINT ignored, as `sleep 100 &` does, and
# so would every process it starts, the command a test stops with SIGINT among them.
_CTRL_C = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('raytrace_kit', run_name='__main__', alter_sys=True)"
)


def cli_command(*arguments: str) -> list[str]:
    """The argv of ``python -m raytrace_kit ARGUMENTS`` that Ctrl-C (SIGINT) stops.

    Under ``faulthandler``: a test that finds it hung sends SIGABRT for its stacks.
    """
    return [sys.executable, "-X", "faulthandler", "-u", "-c", _CTRL_C, *arguments]


def start_shared_ray() -> None:
    """Start the session's Ray instance if it is not running (it is shared by tests)."""
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)


@contextlib.contextmanager
def node_cluster(directories: list[Path]) -> Iterator[Any]:
    """A head and one node per directory, one CPU each, ``node<i>`` resources, connected.

    Node ``i`` (from 1) writes to ``directories[i - 1]``, as a separate machine would; the
    head writes to the session directory. The cluster uses this machine's Ray token if it
    has one, as clusters started by ``ray start`` do (and the commands that attach to it
    send it); without one, none of them does.
    """
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    from raytrace_kit import _ray_compat  # noqa: PLC0415

    if ray.is_initialized():
        ray.shutdown()  # a driver connects to one cluster; the shared one restarts later
    before = os.environ.get("RAY_AUTH_MODE")
    _ray_compat.token_auth_for_attach()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token here: nobody sends one
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"node0": 1}, "include_dashboard": False},
    )
    try:
        for i, directory in enumerate(directories, 1):
            cluster.add_node(
                num_cpus=1,
                resources={f"node{i}": 1},
                env_vars={"RAYTRACE_LOG_DIR": str(directory)},
            )
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if before is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = before


class _Window:
    """When the current test started: what was written before belongs to earlier tests."""

    started = ""


def ray_session_dir() -> str:
    """The running Ray session's directory, as Ray itself says (never through the kit).

    The public getters from Ray 2.54; Ray 2.40-2.53 keep both on the node object only.
    Self-contained, so that programs the tests run can take its source
    (``inspect.getsource``).
    """
    import ray  # noqa: PLC0415 -- its source runs on its own in test programs

    context = ray.get_runtime_context()
    if hasattr(context, "get_session_name"):  # Ray 2.54 and later
        return f"{context.get_temp_dir()}/{context.get_session_name()}"
    return str(ray._private.worker._global_node.get_session_dir_path())


def open_window() -> None:
    """Start the current test's window (the conftest's autouse fixture calls this)."""
    _Window.started = datetime.now(timezone.utc).isoformat(timespec="microseconds")


def window_start() -> str:
    """When the current test started (UTC, ISO 8601), as event timestamps are written."""
    return _Window.started


def events_of(function: Any, event: str | None = None) -> list[dict[str, Any]]:
    """Events of one debuggable written during the current test.

    Matched by qualified name (the function, or the methods of a class), optionally of
    one event type. Tests share one Ray session and its log directory, so events of
    earlier tests are left out by time. The submission records (``call.submit``, written
    by the process that submitted each call) come only when asked for by name: the rest
    are the calls' own events.
    """
    name = f"{function.__module__}.{function.__qualname__}"
    since = window_start()
    return [
        e
        for e in raytrace_kit.read_events()
        if e["timestamp"] >= since
        and (e.get("function") == name or str(e.get("function")).startswith(name + "."))
        and (e["event"] == event if event is not None else e["event"] != "call.submit")
    ]


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``condition`` until it returns something true; fail naming ``what`` if it never does.

    The deadline is generous on purpose: it bounds a test that would hang, it is not a
    margin the behaviour must meet.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.05)


def wait_for_start(target: object, function_suffix: str) -> None:
    """Wait until a call of ``target`` ending in ``function_suffix`` has started."""
    deadline = time.monotonic() + 30
    while not any(e["function"].endswith(function_suffix) for e in events_of(target, "call.start")):
        assert time.monotonic() < deadline, f"{function_suffix} never started"
        time.sleep(0.05)


def listening_sockets(pid: int) -> set[str]:
    """The TCP sockets process ``pid`` listens on (from /proc, no psutil needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(fields[1])
    return found


def table_rows(markup: str) -> list[list[str]]:
    """The text of each table row's cells in an HTML fragment, as a notebook shows them."""
    from html.parser import HTMLParser  # noqa: PLC0415

    rows: list[list[str]] = []

    class _Rows(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag == "tr":
                rows.append([])
            elif tag in {"td", "th"}:
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in {"td", "th"} and self.cell is not None and rows:
                rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    _Rows(convert_charrefs=True).feed(markup)
    return rows


class EventFile:
    """One process's event file, written as the kit writes it: its encoder, its writer.

    For tests of reading and reporting without Ray: ``start`` and ``end`` write a call's
    ``call.start`` and ``call.end`` lines (the timestamp is the time of writing, or ``at``:
    seconds since the epoch, for a run of a known shape).
    """

    def __init__(self, directory: Path, pid: int, node: str = "ab" * 28) -> None:
        # Imported here: the conftest imports this module, so a rename inside the kit fails
        # only the tests that write event files.
        from raytrace_kit._output import encode, paths  # noqa: PLC0415
        from raytrace_kit._output.writer import EventWriter  # noqa: PLC0415
        from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415

        self._encode = encode
        self.identity = ProcessIdentity("01000000", node, f"{pid:056x}", pid, is_worker=True)
        self.path = directory / paths.event_file_name(node, pid)
        self.writer = EventWriter(self.path)
        self._members: dict[str, str] = {}
        self._rss: dict[str, int] = {}

    def start(
        self,
        call_id: str,
        function: str,
        *,
        actor_id: str | None = None,
        parent: str | None = None,
        args: tuple[Any, ...] | None = None,
        rss: int = 2**20,
        at: float | None = None,
    ) -> None:
        """Write the ``call.start`` of a call (of an actor's method if ``actor_id`` is given).

        ``parent`` is the call id of the call that submitted this one; ``args`` its
        arguments, as ``log_args=True`` records them.
        """
        encode = self._encode
        kind = "actor_method" if actor_id else "task"
        members = self._members[call_id] = encode.call_members(
            call_id=call_id,
            spec_fragment=encode.members({"function": function, "kind": kind}),
            mode="ray",
            task_id=call_id.ljust(48, "f"),
            actor_id=actor_id,
            identity=self.identity,
            attempt=0,
            parent=f"{parent}/{parent.ljust(48, 'f')}" if parent else None,
        )
        self._rss[call_id] = rss
        tail = encode.memory_members((rss, rss // 2, rss))
        if args is not None:
            tail += encode.args_members(args, {})
        self.writer.write(_stamped(encode.call_line("call.start", "info", members, tail), at))

    def end(
        self,
        call_id: str,
        error: BaseException | None = None,
        *,
        seconds: float = 0.0,
        rss: int = 2 * 2**20,
        at: float | None = None,
    ) -> None:
        """Write the ``call.end`` of a started call: ok, or failed with ``error``."""
        encode = self._encode
        figures = (rss, rss // 2, rss)
        tail = encode.end_members(
            seconds, error, None, rss_start=self._rss.pop(call_id), figures=figures
        )
        level = "info" if error is None else "error"
        line = encode.call_line("call.end", level, self._members.pop(call_id), tail)
        self.writer.write(_stamped(line, at))

    def close(self) -> None:
        """Close the file (the process's end)."""
        self.writer.close()


def _stamped(line: bytes, at: float | None) -> bytes:
    """``line`` with its timestamp (the first member, fixed width) set to ``at``."""
    if at is None:
        return line
    stamp = datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="microseconds")
    assert line[:14] == b'{"timestamp":"', line
    assert line[46:47] == b'"', line
    return line[:14] + stamp.encode() + line[46:]


# --- a run of a known shape, for the report's pictures ---

KNOWN_START = datetime(2025, 6, 2, 12, 0, tzinfo=timezone.utc).timestamp()  # long gone
MIB = 2**20


def write_known_run(directory: Path) -> None:
    """Write a 4.5 s run of two processes whose every picture has a known answer.

    - pid 1001 (node ``aa...``) runs ``jobs.parse`` six times back to back, 0.5 s each, from
      0 s; the fourth (1.5 s to 2.0 s) fails with ``ValueError``. A seventh starts at 4.0 s
      and never ends (its process died). Its RSS stays at 100 MiB.
    - pid 1002 (node ``bb...``) runs ``jobs.fetch`` six times, 0.2 s each with 0.1 s gaps,
      but the fifth, from 1.2 s, takes 3.0 s (a straggler: the median is 0.2 s). Its RSS
      ends each call 16 MiB higher, from 200 MiB to 296 MiB: it leaks.
    """
    parse = EventFile(directory, 1001, node="aa" * 28)
    for index in range(6):
        call, begun = f"a{index:015x}", index * 0.5
        parse.start(call, "jobs.parse", rss=100 * MIB, at=KNOWN_START + begun)
        error = ValueError("bad row 3") if index == 3 else None
        parse.end(call, error, seconds=0.5, rss=100 * MIB, at=KNOWN_START + begun + 0.5)
    parse.start(f"a{6:015x}", "jobs.parse", rss=100 * MIB, at=KNOWN_START + 4.0)
    parse.close()
    fetch = EventFile(directory, 1002, node="bb" * 28)
    begun, rss = 0.0, 200 * MIB
    for index in range(6):
        call, took = f"b{index:015x}", 3.0 if index == 4 else 0.2
        fetch.start(call, "jobs.fetch", rss=rss, at=KNOWN_START + begun)
        rss += 16 * MIB
        fetch.end(call, seconds=took, rss=rss, at=KNOWN_START + begun + took)
        begun += took + 0.1
    fetch.close()


# --- a run of many parents, for what a report's work grows with ---

MANY_PARENTS_ROUND = 50  # calls per round: a parent, its 5 children, 11 more per process


def write_many_parents(directory: Path, calls: int) -> None:
    """Write about ``calls`` calls of four processes, a parent and its children in each round.

    Each round (a second of the run) pid 1001 runs a ``jobs.fan_out`` that submits 5
    ``jobs.step`` calls to pids 1002 to 1004, one after another (the ray.get-in-a-loop
    pattern), and ends after them; then each process runs 11 calls of its own. Call ids are
    the kit's (a prefix per process, a counter). Read in order of their files' names, the
    parents' process comes first: a parent is read before its children.
    """
    files = [EventFile(directory, 1001 + i) for i in range(4)]
    counters = [0] * len(files)

    def call_id(process: int) -> str:
        counters[process] += 1
        return f"{1001 + process:010x}{counters[process]:06x}"

    for round_number in range(calls // MANY_PARENTS_ROUND):
        begun = KNOWN_START + round_number
        parent = call_id(0)
        files[0].start(parent, "jobs.fan_out", rss=MIB, at=begun)
        for k in range(5):
            child, events = call_id(1 + k % 3), files[1 + k % 3]
            at = begun + 0.1 * k + 0.01
            events.start(child, "jobs.step", parent=parent, rss=MIB, at=at)
            events.end(child, seconds=0.08, rss=MIB, at=at + 0.08)
        files[0].end(parent, seconds=0.6, rss=MIB, at=begun + 0.6)
        for process, events in enumerate(files):
            for j in range(11):
                made, at = call_id(process), begun + 0.62 + 0.03 * j
                events.start(made, f"jobs.work{j}", rss=MIB, at=at)
                events.end(made, seconds=0.02, rss=MIB, at=at + 0.02)
    for events in files:
        events.close()


def pictures(markup: str) -> dict[str, ElementTree.Element]:
    """The report's pictures in ``markup`` (a page, a card, a browser's DOM), by kind.

    Each ``<svg class="raytrace-kit-chart KIND">`` is parsed as XML: a picture that is
    not well formed fails here.
    """
    found = {}
    for match in re.finditer(r"<svg\b[^>]*raytrace-kit-chart.*?</svg>", markup, re.DOTALL):
        root = ElementTree.fromstring(match.group(0))  # noqa: S314 -- the kit's own output
        found[root.get("class", "").split()[-1]] = root
    return found


def shapes(
    root: ElementTree.Element, tag: str = "", kind: str = ""
) -> Iterator[ElementTree.Element]:
    """The elements under ``root`` (itself included) of a tag and with a class, if given."""
    for element in root.iter():
        if tag and element.tag.rsplit("}", 1)[-1] != tag:
            continue
        if kind and not set(kind.split()) <= set(element.get("class", "").split()):
            continue
        yield element


def tooltip(element: ElementTree.Element) -> str:
    """The ``<title>`` an SVG element carries (its tooltip), or ``""``."""
    return next((child.text or "" for child in shapes(element, "title")), "")


# --- local mode against plain Ray: the same body run both ways, the same outcome ---

Remote = Callable[..., Any]  # ray.remote, or debuggable(ray.remote(...)) in local mode
Body = Callable[[], Any]


def add(a: int, b: int) -> int:
    """A plain task, for comparisons that need one and do not care which."""
    return a + b


def outcome(body: Callable[[], Any]) -> tuple[str, ...]:
    """("value", repr(v)), or (where it raised: "submit"/"get", type, message)."""
    stage = "submit"
    try:
        pending = body()
        stage = "get"
        return ("value", repr(pending()))
    except Exception as error:
        cause = getattr(error, "cause", None) or error
        return (stage, type(cause).__name__, str(cause).split("\n")[0])


def outcome_without_ids(body: Callable[[], Body]) -> tuple[Any, ...]:
    """("value", v), or (where it raised: "submit"/"get", type, first line of message).

    Ids and addresses in the message are replaced by placeholders: they differ between
    the plain run and the local one.
    """
    stage = "submit"
    try:
        pending = body()
        stage = "get"
        return ("value", pending())
    except Exception as error:
        cause = getattr(error, "cause", None) or error
        first = str(cause).split("\n")[0]
        first = re.sub("0x[0-9a-f]+", "<address>", re.sub("[0-9a-f]{16,}", "<id>", first))
        return (stage, type(cause).__name__, first)


def run_row(row: Callable[..., Body], remote: Remote, tmp: Path) -> tuple[Any, ...]:
    """The outcome of one row of an :class:`AgainstPlainRay` table, run with ``remote``."""
    if "tmp" in row.__code__.co_varnames[: row.__code__.co_argcount]:
        return outcome_without_ids(lambda: row(remote, tmp))
    return outcome_without_ids(lambda: row(remote))


def _local(target: Any) -> Any:
    return debuggable(ray.remote(target))


class AgainstPlainRay:
    """A table of rows, each run with plain Ray and then in strict local mode without Ray.

    A subclass named ``Test...`` lists its ``ROWS``. A row takes ``remote`` (``ray.remote``,
    or ``debuggable(ray.remote(...))``) and, if it names one, ``tmp`` (a directory of its
    own), submits what it tests and returns the body whose outcome counts: a value, or where
    an exception came and its type and first line. All of a class's rows run with plain Ray
    first (the ``plain`` fixture, in tests/integration/local/conftest.py); each then runs in
    strict local mode *with Ray shut down*, as users run it. The two outcomes must be equal,
    and local mode must not have started a cluster.
    """

    ROWS: ClassVar[list[Callable[..., Body]]] = []

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """One test per row, named after it."""
        if "row" in metafunc.fixturenames:
            metafunc.parametrize("row", self.ROWS, ids=lambda r: r.__name__)

    def test_local_mode_matches_ray(
        self, row: Callable[..., Body], plain: dict[str, tuple[Any, ...]], tmp_path: Path
    ) -> None:
        """The same outcome as plain Ray, in strict local mode, and no cluster started."""
        if ray.is_initialized():
            ray.shutdown()
        with local_mode(strict=True):
            local = run_row(row, _local, tmp_path)
        assert local == plain[row.__name__]
        assert not ray.is_initialized()


def marked_line(path: Path, marker: str) -> int:
    """The line of ``path`` that ends in the comment ``# marker``."""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(marker)
