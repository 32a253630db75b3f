"""Integration: an async method that blocks its actor's event loop, named on real Ray.

The blocking is real (``time.sleep`` inside ``async def``, a loop until a file exists):
what the tests assert does not depend on how fast the machine is, only on the loop being
held for longer than the kit's threshold (0.1 s), which a 0.3 s sleep always is.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers

HERE = Path(__file__)

pytestmark = pytest.mark.usefixtures("ray_session")

# A user's async actor: fetch() sleeps with time.sleep, holding the loop; ping() waits.
_PROGRAM = textwrap.dedent(
    """
    import asyncio, os, time
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)

    @ray.remote
    class Fetcher:
        async def fetch(self, i):
            {wait}  # the waiting line
            return i

        async def ping(self):
            return "pong"

    fetcher = Fetcher.remote()
    print(ray.get([fetcher.fetch.remote(i) for i in range(4)] + [fetcher.ping.remote()]))
    """
)


def _run(tmp_path: Path, wait: str) -> raytrace_kit.Report:
    """The program with ``wait`` as its waiting line, under ``raytrace-kit run``; its report."""
    script = tmp_path / "fetcher.py"
    script.write_text(_PROGRAM.format(wait=wait))
    helpers.start_shared_ray()
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "run", str(script)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 2, 3, 'pong']"  # the program's own result
    return raytrace_kit.report(raytrace_kit.log_dir(), since=helpers.window_start())


class TestBlockedLoop:
    """The report names the method, its line and the fix; silent for the fixed program."""

    def test_time_sleep_in_async_def_is_named(self, tmp_path: Path) -> None:
        """time.sleep(0.3) in an async method: its line, its turns, the fix."""
        made = _run(tmp_path, "time.sleep(0.3)")
        (found,) = [f for f in made.findings if f.kind == "blocked_loop"]
        assert found.subject.endswith("Fetcher.fetch")
        line = next(n for n, t in enumerate(_lines(tmp_path), 1) if "# the waiting line" in t)
        assert f"fetcher.py:{line}" in found.title
        assert "time.sleep(0.3)" in found.evidence
        assert "await asyncio.sleep()" in found.fix
        (row,) = made.blocked_loops
        assert row["turns"] == 4  # each fetch held it once
        assert row["longest_s"] >= 0.25
        text = str(made)
        assert "- An async method blocks its actor's event loop: Fetcher.fetch held it" in text
        # The actor is async: it is not told to make its methods async.
        advice = [f.fix for f in made.findings if "Fetcher" in f.title + f.subject]
        assert not [fix for fix in advice if "(async methods" in fix], advice

    def test_await_asyncio_sleep_is_clean(self, tmp_path: Path) -> None:
        """The same program awaiting asyncio.sleep: no held turn, no finding."""
        made = _run(tmp_path, "await asyncio.sleep(0.3)")
        assert made.blocked_loops == []
        assert [f.kind for f in made.findings if f.kind == "blocked_loop"] == []


def _lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "fetcher.py").read_text().splitlines()


@debuggable
@ray.remote
class Holder:
    """An async actor whose hold() blocks its loop until a file exists."""

    async def hold(self, release: str) -> str:
        while not os.path.exists(release):
            time.sleep(0.02)  # holds the loop
        return "released"

    async def ping(self) -> str:
        return "pong"

    async def naps(self, release: str) -> str:
        while not os.path.exists(release):
            await asyncio.sleep(0.02)  # naps awaits
        return "rested"


def test_stuck_shows_a_loop_held_now(tmp_path: Path) -> None:
    """stuck() while hold() blocks: the loop, the call, the line; ping() is still pending."""
    release = tmp_path / "release"
    holder = Holder.remote()  # type: ignore[attr-defined]
    ray.get(holder.ping.remote())  # started: its loop runs
    napping = holder.naps.remote(str(release))
    helpers.wait_until(
        lambda: [
            e for e in helpers.events_of(Holder, "call.start") if e["function"].endswith(".naps")
        ],
        "naps() started",
    )
    held = holder.hold.remote(str(release))
    waiting = holder.ping.remote()

    def held_now() -> Any:
        found = raytrace_kit.stuck()
        return found if found.held_loops else None

    try:
        found = helpers.wait_until(held_now, "stuck() shows the held loop")
        (loop,) = found.held_loops
        assert loop["function"].endswith("Holder.hold")
        assert loop["stack"][-1][3] == "time.sleep(0.02)  # holds the loop"
        text = str(found)
        assert "Event loops held by one call" in text
        assert "Holder.hold (call " in text
        assert "has held its event loop for " in text
        assert found.to_dict()["held_loops"][0]["call_id"] == loop["call_id"]
        # The table says it too: the holder holds at its line, the napper awaits behind it.
        (holding,) = [f for f in found.running if f.function.endswith(".hold")]
        (napper,) = [f for f in found.running if f.function.endswith(".naps")]
        hold_line, nap_line = (
            f"{HERE}:{helpers.marked_line(HERE, marker)}"
            for marker in ("holds the loop", "naps awaits")
        )
        assert holding.where == hold_line
        assert re.fullmatch(rf"holding its event loop \([0-9.]+ s\) at {hold_line}", holding.why)
        assert napper.why == (
            f"awaiting asyncio.sleep() at {nap_line}; its event loop is held by "
            f"Holder.hold (call {loop['call_id']})"
        ), napper.why
    finally:
        release.touch()
    assert ray.get([held, waiting, napping]) == ["released", "pong", "rested"]
    ray.kill(holder)
