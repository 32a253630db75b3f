"""``raytrace-kit top`` tried as a person would: in a terminal (tmux), beside a running job.

A 3-node cluster (nodes 1 and 2 with directories of their own, as separate machines)
runs a steady stream of calls on every node; ``raytrace-kit top --address ...`` runs in a
tmux pane, and the test reads the pane as a person reads the screen: the functions are
there and their counts rise, a call that fails shows with its error, a call that runs far
longer than its function's median is named as a straggler, and ``q`` ends it with the
terminal as it was (the screen from before, the shell's line editing back); so does
Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from raytrace_kit import debuggable
from tests import helpers

pytestmark = pytest.mark.cluster

WORK = f"{__name__}.work"


@debuggable
@ray.remote(num_cpus=0)
def work(seconds: float) -> int:
    time.sleep(seconds)
    return 1


@debuggable
@ray.remote(num_cpus=0)
def explode(marker: str) -> None:
    raise ValueError(f"boom {marker}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directories = [tmp_path_factory.mktemp(f"top-node{i}") for i in (1, 2)]
    with helpers.node_cluster(directories) as made:
        yield made


@pytest.fixture
def job(cluster: Cluster) -> Iterator[None]:
    """Calls of ``work`` on every node, three at a time, until the test ends."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            ray.get([work.options(resources={f"node{k}": 0.01}).remote(0.05) for k in range(3)])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=60)


class Tmux:
    """One tmux server of the test's own (its own socket), one pane running a shell."""

    def __init__(self, name: str) -> None:
        self.socket = name
        self.tmux = shutil.which("tmux") or "tmux"
        self.run(
            "new-session", "-d", "-s", "main", "-x", "230", "-y", "80", "bash --norc --noprofile"
        )

    def run(self, *arguments: str) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *arguments],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        return done.stdout

    def type(self, text: str, enter: bool = True) -> None:
        self.run("send-keys", "-t", "main", text, *(["Enter"] if enter else []))

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "main")

    def close(self) -> None:
        subprocess.run(
            [self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False
        )


def _row(screen: str, function: str) -> list[str] | None:
    """The cells of ``function``'s row in the Functions table, as the screen shows them."""
    for line in screen.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == function and len(cells) == 7 and cells[1].isdigit():
            return cells
    return None


def _done(screen: str) -> int:
    row = _row(screen, WORK)
    return int(row[3]) if row else -1


def test_top_in_a_terminal_beside_a_running_job(cluster: Cluster, job: None) -> None:
    tmux = Tmux(f"raytrace-kit-test-{id(cluster)}")
    try:
        tmux.type("echo before-top && stty -a | grep -o -- '-\\?icanon'")
        helpers.wait_until(lambda: "before-top" in tmux.screen(), "the shell in the pane")
        tmux.type(f"{sys.executable} -m raytrace_kit top --address {cluster.address}")

        # The functions, and their counts rising as the job goes on.
        first = helpers.wait_until(lambda: max(_done(tmux.screen()), 0), "work's calls counted")
        helpers.wait_until(lambda: _done(tmux.screen()) > first, "work's count rising")
        screen = tmux.screen()
        assert "Nodes" in screen
        assert screen.count("MiB") >= 3  # each node's processes' memory

        # A call that fails shows with its error line, on the node it ran.
        with pytest.raises(ValueError, match="boom"):
            ray.get(explode.options(resources={"node2": 0.01}).remote("marker-7f3a"))
        helpers.wait_until(
            lambda: "ValueError: boom marker-7f3a" in tmux.screen(), "the failure on screen"
        )

        # A call far beyond its function's median is named, while it runs.
        long = work.options(resources={"node1": 0.01}).remote(120)
        helpers.wait_until(lambda: _straggler(tmux.screen()), "the straggler named")
        Path(os.environ.get("RAYTRACE_TOP_SCREEN", os.devnull)).write_text(tmux.screen())

        # q ends it: the screen from before is back, and the shell's line editing.
        tmux.type("q", enter=False)
        helpers.wait_until(lambda: "Functions" not in tmux.screen(), "top gone from the screen")
        assert "before-top" in tmux.screen()  # the alternate screen left: what was there
        tmux.type("stty -a | grep -o -- '-\\?icanon' && echo after-top")
        helpers.wait_until(lambda: _said(tmux.screen(), "after-top"), "the shell answering again")
        modes = [line for line in tmux.screen().splitlines() if line.endswith("icanon")]
        assert modes[-1] == modes[0] == "icanon"  # canonical mode again, as before

        # Ctrl-C ends it as cleanly, and says nothing of an interrupt.
        tmux.type("clear; echo again-top")
        tmux.type(f"{sys.executable} -m raytrace_kit top --address {cluster.address}")
        helpers.wait_until(lambda: _row(tmux.screen(), WORK), "top shown again")
        tmux.run("send-keys", "-t", "main", "C-c")
        helpers.wait_until(lambda: "again-top" in tmux.screen(), "top gone after Ctrl-C")
        tmux.type("echo status=$? && stty -a | grep -o -- '-\\?icanon' && echo after-ctrl-c")
        helpers.wait_until(lambda: _said(tmux.screen(), "after-ctrl-c"), "the shell after Ctrl-C")
        screen = tmux.screen()
        assert _said(screen, "status=0")
        assert "Traceback" not in screen
        assert "KeyboardInterrupt" not in screen
        assert [line for line in screen.splitlines() if line.endswith("icanon")][-1] == "icanon"
        ray.cancel(long, force=True)
    finally:
        tmux.close()


def _said(screen: str, line: str) -> bool:
    """Whether ``line`` is a whole line of the screen (output, not the command typed)."""
    return line in [text.strip() for text in screen.splitlines()]


def _straggler(screen: str) -> bool:
    """Whether the Stragglers table names a running call of ``work``."""
    lines = screen.splitlines()
    if not any(line.startswith("Stragglers") for line in lines):
        return False
    start = next(i for i, line in enumerate(lines) if line.startswith("Stragglers"))
    for line in lines[start:]:
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == WORK and cells[1] == "running":
            return True
    return False
