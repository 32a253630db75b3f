"""Locals at failure, with real Ray: a failed call's record says what its variables were.

The acceptance of issue 45, part 1: a task fails with ZeroDivisionError at a known line,
with ``qty = 0``, ``discount = 0.5`` and an argument ``api_token``. ``raytrace-kit report``
(text and HTML) and ``explain --task`` show ``qty`` and ``discount`` with their types under
that frame (and their values with ``log_args``); the token's value is in no file the kit
wrote. Decorated by hand (``@debuggable``) and unedited (``raytrace-kit run``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import RaytraceKitWarning, debuggable, local_mode
from raytrace_kit._output import locals as frame_locals
from tests import helpers

TOKEN = "tok-locals-7f3a9c1e5b2d"  # a test value, not a credential: grepped for in the files


@debuggable
@ray.remote(max_retries=0)
def checkout(qty: int, api_token: str) -> float:
    discount = 0.5
    return 100 * discount / qty  # fails here


@debuggable(log_args=True)
@ray.remote(max_retries=0)
def checkout_shown(qty: int, api_token: str) -> float:
    discount = 0.5
    return 100 * discount / qty  # fails here


def _failing_line(path: Path, function: str) -> int:
    """The line of ``# fails here`` in ``function`` (def ... to the marked line)."""
    lines = path.read_text().splitlines()
    start = next(n for n, text in enumerate(lines) if text.startswith(f"def {function}("))
    return next(n for n, text in enumerate(lines[start:], start + 1) if "# fails here" in text)


def _under_frame(text: str, path: Path, line: int, function: str) -> list[str]:
    """The lines a report shows under one frame of a traceback: its code, then its locals."""
    lines = text.splitlines()
    at = lines.index(f'  File "{path}", line {line}, in {function}')
    shown = []
    for following in lines[at + 1 :]:
        if not following.startswith("    "):
            break
        shown.append(following.strip())
    return shown


def _kit_files_hold(secret: str) -> list[Path]:
    """The files under the session's raytrace_kit log dir (recursively) that hold ``secret``."""
    root = raytrace_kit.log_dir()
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def _report(*options: str) -> str:
    """``raytrace-kit report`` of this test's calls, as a user runs it."""
    since = helpers.window_start()
    done = helpers.run_cli("report", str(raytrace_kit.log_dir()), "--since", since, *options)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.usefixtures("ray_session")
class TestDecorated:
    """``@debuggable``: the failing frame's locals in the record, the report and explain."""

    def test_types_without_values_and_no_token_anywhere(self, tmp_path: Path) -> None:
        with pytest.raises(ZeroDivisionError):
            ray.get(checkout.remote(0, api_token=TOKEN))
        (end,) = helpers.events_of(checkout, "call.end")
        line = _failing_line(Path(__file__), "checkout")
        *_, frame = end["frames_locals"]
        described = {"qty": "int", "api_token": f"str of {len(TOKEN)} chars", "discount": "float"}
        assert frame == [__file__, line, "checkout", described]  # no values without log_args

        under = _under_frame(_report(), Path(__file__), line, "checkout")
        assert under[0] == "return 100 * discount / qty  # fails here"
        assert under[-4:] == [
            "locals:", "qty: int", f"api_token: str of {len(TOKEN)} chars", "discount: float",
        ]  # fmt: skip
        _report("--html", str(tmp_path / "report.html"))
        page = (tmp_path / "report.html").read_text()
        assert "qty: int\n" in page
        assert "discount: float\n" in page

        explained = helpers.run_cli(
            "explain", str(raytrace_kit.log_dir()), "--task", end["task_id"][:16]
        )
        assert explained.returncode == 0, explained.stderr
        assert _under_frame(explained.stdout, Path(__file__), line, "checkout")[-4:] == [
            "locals:", "qty: int", f"api_token: str of {len(TOKEN)} chars", "discount: float",
        ]  # fmt: skip
        assert _kit_files_hold(TOKEN) == []

    def test_values_with_log_args_the_token_redacted(self) -> None:
        with pytest.raises(ZeroDivisionError):
            ray.get(checkout_shown.remote(0, api_token=TOKEN))
        line = _failing_line(Path(__file__), "checkout_shown")
        under = _under_frame(_report(), Path(__file__), line, "checkout_shown")
        assert under[-4:] == [
            "locals:", "qty: int = 0",
            f"api_token: str of {len(TOKEN)} chars = <redacted>", "discount: float = 0.5",
        ]  # fmt: skip
        assert _kit_files_hold(TOKEN) == []

    def test_a_call_that_succeeds_records_no_locals(self) -> None:
        assert ray.get(checkout_shown.remote(4, api_token=TOKEN)) == 12.5
        (end,) = helpers.events_of(checkout_shown, "call.end")
        assert end["status"] == "ok"
        assert "frames_locals" not in end


class TestNeverBreaksTheCall:
    """Describing a failure that itself fails: one warning, the call's exception as raised."""

    def test_a_failure_to_describe_leaves_the_call_alone(self, monkeypatch: Any) -> None:
        def broken(error: BaseException, *, values: bool = False) -> list[Any]:
            msg = "the kit's own failure"
            raise RuntimeError(msg)

        monkeypatch.setattr(frame_locals, "frames_locals", broken)
        with (
            local_mode(),
            pytest.warns(RaytraceKitWarning, match="locals of the failed call"),
            pytest.raises(ZeroDivisionError, match="division by zero") as raised,
        ):
            ray.get(checkout.remote(0, api_token=TOKEN))
        assert "RuntimeError" not in "".join(map(str, raised.value.args))
        (end,) = helpers.events_of(checkout, "call.end")
        assert (end["status"], end["error_type"]) == ("error", "ZeroDivisionError")
        assert "frames_locals" not in end


_PROGRAM = """\
import os
import ray


@ray.remote(max_retries=0)
def locals_checkout(qty, api_token):
    discount = 0.5
    return 100 * discount / qty  # fails here


ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
try:
    ray.get(locals_checkout.remote(0, api_token=os.environ["CHECKOUT_TOKEN"]))
except ZeroDivisionError:
    print("failed as expected")
"""


@pytest.mark.usefixtures("ray_session")
class TestUnedited:
    """``raytrace-kit run``: an undecorated program's failing frame, as decorated."""

    @pytest.mark.parametrize(
        ("options", "shown"),
        [
            ((), ["qty: int", "api_token: str of {n} chars", "discount: float"]),
            (
                ("--log-args",),
                ["qty: int = 0", "api_token: str of {n} chars = <redacted>",
                 "discount: float = 0.5"],
            ),
        ],
        ids=["types", "values"],
    )  # fmt: skip
    def test_run_records_the_locals(
        self, tmp_path: Path, options: tuple[str, ...], shown: list[str]
    ) -> None:
        script = tmp_path / "shop.py"
        script.write_text(_PROGRAM)
        environment: dict[str, Any] = {
            **os.environ,
            "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
            "CHECKOUT_TOKEN": TOKEN,
        }
        done = subprocess.run(
            [sys.executable, "-m", "raytrace_kit", "run", *options, str(script)],
            capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
            env=environment,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "failed as expected\n"), done.stderr
        line = _failing_line(script, "locals_checkout")
        under = _under_frame(_report(), script, line, "locals_checkout")
        assert under[-4:] == ["locals:", *(text.format(n=len(TOKEN)) for text in shown)]
        # The token was in the driver's environment and the call's arguments: still nowhere.
        assert _kit_files_hold(TOKEN) == []
