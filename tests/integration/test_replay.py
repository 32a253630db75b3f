"""Replay one failed call, with real Ray: the same exception from the same line, again.

The acceptance of issue 45, part 2. A program run by ``raytrace-kit run --capture
failures`` fails in a task (``ZeroDivisionError``, with an argument ``api_token``) and in
an actor method (``KeyError``, on state an earlier call changed); ``raytrace-kit replay
ID``, a real subprocess, raises each again from its line (exit code 1), ``--pdb`` stops
there (pdb driven through its stdin). The token's value is in no kit file but the 0600
replay file; a file others may read is refused; a call that was not captured says why.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import RaytraceKitWarning, ReplayError, debuggable, local_mode
from tests import helpers

TOKEN = "tok-replay-4e8b2d6f1a9c"  # a test value, not a credential: grepped for in the files

_PROGRAM = """\
import os
import ray


@ray.remote(max_retries=0)
def replay_checkout(qty, api_token):
    discount = 0.5
    return 100 * discount / qty  # fails here


@ray.remote(max_restarts=0)
class ReplayShop:
    def __init__(self):
        self.prices = {"apple": 1.5}
        self.sold = 0

    def sell(self, item):
        self.sold += 1
        return self.prices[item]

    def price_of(self, item):
        return self.prices[item]  # fails here


ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
try:
    ray.get(replay_checkout.remote(0, api_token=os.environ["CHECKOUT_TOKEN"]))
except ZeroDivisionError:
    print("task failed")
shop = ReplayShop.remote()
ray.get([shop.sell.remote("apple"), shop.sell.remote("apple")])
try:
    ray.get(shop.price_of.remote("pear"))
except KeyError:
    print("method failed")
"""


def _failing_line(path: Path, function: str) -> int:
    """The line of ``# fails here`` in ``function`` (def ... to the marked line)."""
    lines = path.read_text().splitlines()
    start = next(n for n, text in enumerate(lines) if text.strip().startswith(f"def {function}("))
    return next(n for n, text in enumerate(lines[start:], start + 1) if "# fails here" in text)


def _ran(script: Path, *options: str) -> dict[str, dict[str, Any]]:
    """Run the program under ``raytrace-kit run``; the ``call.end`` of each of its calls."""
    environment = {
        **os.environ,
        "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "CHECKOUT_TOKEN": TOKEN,
    }
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "run", *options, str(script)],
        capture_output=True, text=True, timeout=300, check=False, cwd=script.parent,
        env=environment,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "task failed\nmethod failed\n"), done.stderr
    since = helpers.window_start()
    ends = [
        e
        for e in raytrace_kit.read_events(raytrace_kit.log_dir())
        if e["timestamp"] >= since and e["event"] == "call.end" and e["status"] == "error"
    ]
    return {e["function"].rpartition(".")[2]: e for e in ends}


def _replay(ident: str, *options: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``raytrace-kit replay IDENT SOURCE OPTIONS``, a real subprocess."""
    source = str(raytrace_kit.log_dir())
    return helpers.run_cli("replay", "--quiet", ident, source, *options, stdin=stdin)


def _last_frame(stderr: str) -> tuple[str, int, str]:
    """The innermost ``File "...", line N, in f`` of a printed traceback."""
    found = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', stderr)
    assert found, stderr
    path, line, function = found[-1]
    return path, int(line), function


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The program run once with ``--capture failures``: its script and its failed calls."""
    helpers.start_shared_ray()
    script = tmp_path_factory.mktemp("shop") / "shop.py"
    script.write_text(_PROGRAM)
    helpers.open_window()
    return script, _ran(script, "--capture", "failures")


@pytest.mark.usefixtures("ray_session")
class TestReplayCommand:
    """``raytrace-kit replay ID``: the same exception from the same line, in a new process."""

    def test_a_task_raises_again_from_its_line(self, captured: Any) -> None:
        script, ends = captured
        end = ends["replay_checkout"]
        path = Path(end["replay_path"])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        done = _replay(end["task_id"][:12])
        assert done.returncode == 1, done.stderr
        line = _failing_line(script, "replay_checkout")
        assert _last_frame(done.stderr) == (str(script), line, "replay_checkout")
        assert done.stderr.rstrip().endswith("ZeroDivisionError: float division by zero")

    def test_an_actor_method_raises_again_with_its_state(self, captured: Any) -> None:
        script, ends = captured
        end = ends["price_of"]
        assert "replay_state_missing" not in end
        done = _replay(end["call_id"])
        assert done.returncode == 1, done.stderr
        line = _failing_line(script, "price_of")
        assert _last_frame(done.stderr) == (str(script), line, "price_of")
        assert done.stderr.rstrip().endswith("KeyError: 'pear'")

    def test_pdb_stops_at_the_failing_line(self, captured: Any) -> None:
        script, ends = captured
        done = _replay(ends["replay_checkout"]["call_id"], "--pdb", stdin="p qty\np discount\nq\n")
        assert done.returncode == 1, done.stderr
        line = _failing_line(script, "replay_checkout")
        assert f"{script}({line})replay_checkout()" in done.stdout
        assert "(Pdb) 0\n(Pdb) 0.5\n" in done.stdout

    def test_pdb_sees_the_actor_state_earlier_calls_left(self, captured: Any) -> None:
        _, ends = captured
        done = _replay(ends["price_of"]["call_id"], "--pdb", stdin="p self.sold\np item\nq\n")
        assert done.returncode == 1, done.stderr
        assert "(Pdb) 2\n(Pdb) 'pear'\n" in done.stdout

    def test_the_token_is_only_in_the_replay_file(self, captured: Any) -> None:
        _, ends = captured
        kept = Path(ends["replay_checkout"]["replay_path"])
        assert TOKEN.encode() in kept.read_bytes()
        root = raytrace_kit.log_dir()
        holding = [
            p
            for p in root.rglob("*")
            if p.is_file() and p.parent.name != "replay" and TOKEN.encode() in p.read_bytes()
        ]
        assert holding == []

    def test_a_file_others_may_read_is_refused(self, captured: Any) -> None:
        _, ends = captured
        path = Path(ends["replay_checkout"]["replay_path"])
        path.chmod(0o644)
        try:
            done = _replay(ends["replay_checkout"]["call_id"])
        finally:
            path.chmod(0o600)
        assert done.returncode == 1
        assert "has mode 0644: group or others may read or change it" in done.stderr
        assert f"chmod 600 {path}" in done.stderr
        assert "Traceback" not in done.stderr  # nothing was unpickled, nothing ran

    def test_explain_gives_the_replay_command_that_works(self, captured: Any) -> None:
        script, ends = captured
        task = ends["replay_checkout"]["task_id"]
        source = str(raytrace_kit.log_dir())
        explained = helpers.run_cli("explain", "--quiet", "--task", task[:12], source)
        assert explained.returncode == 0, explained.stderr
        suggested = re.search(r"raytrace-kit replay (\S+)", explained.stdout)
        assert suggested is not None, explained.stdout
        assert suggested[1] == task[:16]
        done = helpers.run_cli("replay", "--quiet", suggested[1], source)
        assert _last_frame(done.stderr) == (
            str(script),
            _failing_line(script, "replay_checkout"),
            "replay_checkout",
        )

    def test_a_call_without_capture_says_why(self, tmp_path: Path) -> None:
        script = tmp_path / "shop.py"
        script.write_text(_PROGRAM)
        ends = _ran(script)
        done = _replay(ends["replay_checkout"]["call_id"])
        assert done.returncode == 1
        assert "was not captured: its arguments were not kept" in done.stderr
        assert "--capture failures" in done.stderr
        assert "local_mode(post_mortem=True)" in done.stderr
        source = str(raytrace_kit.log_dir())
        task = ends["replay_checkout"]["task_id"]
        explained = helpers.run_cli("explain", "--quiet", "--task", task, source)
        fixes = explained.stdout.partition("Fix:")[2].partition("The call:")[0]
        assert "run again with raytrace-kit run --capture failures" in fixes, explained.stdout
        assert "then raytrace-kit replay TASK_ID" in fixes


@debuggable(capture="failures")
@ray.remote(max_retries=0)
def checkout(qty: int, api_token: str) -> float:
    discount = 0.5
    return 100 * discount / qty  # fails here


@debuggable(capture="failures")
@ray.remote(max_retries=0)
def locked(qty: int, order: dict[str, Any]) -> float:
    order["lock"] = threading.Lock()  # Ray shipped the order; now it cannot be pickled
    return 1 / qty


@pytest.mark.usefixtures("ray_session")
class TestReplayFunction:
    """``raytrace_kit.replay()``: in this process, for notebooks."""

    def test_raises_the_same_exception_from_the_same_line(self) -> None:
        with pytest.raises(ZeroDivisionError):
            ray.get(checkout.remote(0, api_token=TOKEN))
        (end,) = helpers.events_of(checkout, "call.end")
        with pytest.raises(ZeroDivisionError) as raised:
            raytrace_kit.replay(end["call_id"], raytrace_kit.log_dir())
        innermost = raised.traceback[-1]
        assert (innermost.path, innermost.lineno + 1) == (
            Path(__file__),
            _failing_line(Path(__file__), "checkout"),
        )


class TestNeverBreaksTheCall:
    """What cannot be kept: one warning, a reason in the record; the exception as raised."""

    def test_an_argument_that_cannot_be_pickled(self) -> None:
        with (
            local_mode(),
            pytest.warns(RaytraceKitWarning, match="inputs for replay") as warned,
            pytest.raises(ZeroDivisionError, match="division by zero"),
        ):
            ray.get(locked.remote(0, {"item": "apple"}))
        assert len(warned) == 1
        (end,) = helpers.events_of(locked, "call.end")
        assert "replay_path" not in end
        assert "argument 'order' (a dict) cannot be pickled" in end["replay_missing"]
        with pytest.raises(ReplayError, match="its inputs were not kept: argument 'order'"):
            raytrace_kit.replay(end["call_id"], raytrace_kit.log_dir())

    def test_a_directory_that_cannot_be_written(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RAYTRACE_LOG_DIR", str(tmp_path))
        (tmp_path / "replay").write_text("a file where the directory would go")
        with (
            local_mode(),
            pytest.warns(RaytraceKitWarning, match="inputs for replay"),
            pytest.raises(ZeroDivisionError, match="division by zero"),
        ):
            ray.get(checkout.remote(0, api_token=TOKEN))
        (end,) = helpers.events_of(checkout, "call.end")
        assert end["replay_missing"].startswith("the file could not be written (")
        assert TOKEN not in str(end)

    def test_over_the_cap_is_not_kept(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("RAYTRACE_CAPTURE_MAX_BYTES", "1000")
        with (
            local_mode(),
            pytest.warns(RaytraceKitWarning, match="inputs for replay"),
            pytest.raises(ZeroDivisionError),
        ):
            ray.get(checkout.remote(0, api_token="x" * 5000))
        (end,) = helpers.events_of(checkout, "call.end")
        assert "its inputs are over the 1000 bytes cap pickled" in end["replay_missing"]
