"""explain(): real errors from ray.get, each explained, linked to the failing call's record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
import ray
from ray.exceptions import ActorDiedError, GetTimeoutError, WorkerCrashedError

import raytrace_kit
from raytrace_kit import debuggable, explain
from tests import helpers


@debuggable
@ray.remote
def parse_row(text: str) -> int:
    return int(text)


@debuggable
@ray.remote(max_retries=0)
def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@debuggable
@ray.remote
class Holder:
    def ping(self) -> str:
        return "pong"


@ray.remote
def sleeper() -> None:
    time.sleep(30)


@pytest.mark.usefixtures("ray_session")
class TestExplain:
    def test_task_error_links_the_call_and_its_traceback(self) -> None:
        with pytest.raises(ValueError, match="invalid literal") as raised:
            ray.get(parse_row.remote("seven"))
        explained = explain(raised.value)
        assert explained.kind == "ValueError in a task"
        assert explained.call is not None
        assert explained.call.function.endswith("parse_row")
        text = str(explained)
        assert "    return int(text)" in text  # the failing line, from the call's record
        assert "local_mode(post_mortem=True)" in text
        assert "    return int(text)" in explained._repr_html_()  # the traceback, escaped

    def test_worker_death(self) -> None:
        """Linked when it is the session's only dead call, else listed: with Ray's cause."""
        with pytest.raises(WorkerCrashedError) as raised:
            ray.get(killed.remote())
        text = _explained_until(raised.value, "vanished without Python")
        assert text.startswith("Worker died:")
        # A worker of a few dozen MiB: not the OOM killer's pick, and the text says so.
        assert "vanished without Python shutting down while holding only " in text
        assert "the kernel's OOM killer, which picks the largest process, is unlikely" in text
        assert "tests.integration.test_explain.killed (" in text

    def test_killed_actor(self) -> None:
        holder = Holder.remote()
        ray.get(holder.ping.remote())
        ray.kill(holder)
        deadline = time.monotonic() + 60
        while True:  # ray.kill takes effect asynchronously
            try:
                ray.get(holder.ping.remote(), timeout=60)
            except ActorDiedError as died:
                error = died
                break
            assert time.monotonic() < deadline, "the killed actor still answers"
            time.sleep(0.2)
        explained = explain(error)
        assert explained.kind == "Actor died"
        assert "ray.kill" in explained.what

    def test_timeout(self) -> None:
        ref = sleeper.remote()
        with pytest.raises(GetTimeoutError) as raised:
            ray.get(ref, timeout=0.1)
        ray.cancel(ref, force=True)
        explained = explain(raised.value)
        assert explained.kind == "Timed out"
        assert any("stacks(" in item for item in explained.check)


def test_kit_errors_and_unknown_ones() -> None:
    """The kit's own errors and anything else still get an answer."""
    explained = explain(raytrace_kit.LocalModeError("plain call in strict mode"))
    assert (explained.kind, explained.what) == ("LocalModeError", "plain call in strict mode")
    assert explain(KeyError("k")).kind == "KeyError"


@debuggable
@ray.remote(max_retries=0)
def native_crash() -> None:
    import ctypes  # noqa: PLC0415

    ctypes.string_at(0)  # SIGSEGV


def _explained_until(error: BaseException, words: str, timeout: float = 20.0) -> str:
    """str(explain(error)) once it has ``words`` (Ray's GCS records a death a moment late)."""
    deadline = time.monotonic() + timeout
    while True:
        text = str(explain(error))
        if words in text or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


@pytest.mark.usefixtures("ray_session")
def test_a_worker_death_is_explained_with_rays_record_of_it() -> None:
    """WorkerCrashedError says nothing of why; explain() finds the call and Ray's record."""
    with pytest.raises(WorkerCrashedError) as raised:
        ray.get(native_crash.remote())
    text = _explained_until(raised.value, "SIGSEGV")
    assert text.startswith("Worker died: The process running the task died before it finished.")
    session = raytrace_kit.open_session()
    mine = session.calls(function="native_crash")
    (call,) = [c for c in mine if c.started >= helpers.window_start()]
    # Ray's error names no task. This session has other dead workers (earlier tests'), so
    # explain() lists the calls cut off, the latest first, each with Ray's cause; it
    # does not pick one. (With one dead worker it links it: examples/run_report.py.)
    cause = "crashed in native code: SIGSEGV, exit status 139"
    assert f"  - {call.function} (pid {call.pid}, started {call.started[11:23]}): {cause}" in text
    assert "does not say which task it was" in text

    # From a shell: by the task's id, the one call and its cause; the error's text on stdin.
    assert call.task_id is not None
    by_task = helpers.run_cli("explain", str(session.root), "--task", call.task_id[:16])
    assert by_task.returncode == 0, by_task.stderr
    assert "crashed in native code: SIGSEGV" in by_task.stdout
    printed = "".join(traceback.format_exception(raised.value))  # as the user saw it
    pasted = helpers.run_cli("explain", str(session.root), stdin=printed)
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.startswith("Worker died:")
    # As programs log it: str(error), which names no class; the same explanation.
    logged = helpers.run_cli(
        "explain", str(session.root), stdin=f"ERROR step 3 failed: {raised.value}"
    )
    assert logged.returncode == 0, logged.stderr
    assert logged.stdout.startswith("Worker died:")
    assert f"  - {call.function} (pid {call.pid}" in logged.stdout


@pytest.mark.usefixtures("ray_session")
def test_an_error_text_is_explained_like_the_error() -> None:
    """Pasting what ray.get printed gives what explain(exception) gives: the call included."""
    with pytest.raises(ValueError, match="invalid literal") as raised:
        ray.get(parse_row.remote("eight"))
    printed = "".join(traceback.format_exception(raised.value))
    from_text = explain(printed)
    assert from_text.kind == "ValueError in a task"
    assert from_text.call is not None
    assert from_text.call.function.endswith(".parse_row")
    assert "    return int(text)" in str(from_text)

    shown = helpers.run_cli("explain", str(raytrace_kit.open_session().root), stdin=printed)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("ValueError in a task: Your code raised ValueError in ")
    assert "    return int(text)" in shown.stdout


def test_explain_command_usage_and_exit_codes(tmp_path: Path) -> None:
    not_ray = helpers.run_cli("explain", str(tmp_path), stdin="KeyError: 'k'\n")
    assert not_ray.returncode == 1
    assert not_ray.stdout.startswith("Not a Ray error:")
    (tmp_path / "events-abababababab-7.jsonl").write_text("")
    missing = helpers.run_cli("explain", str(tmp_path), "--task", "feedbeef")
    assert missing.returncode == 3
    assert "no call of task 'feedbeef'" in missing.stderr


@debuggable
@ray.remote
def parse_price(text: str) -> float:
    return float(text)


@ray.remote
def plain_parse(text: str) -> int:
    return int(text)


@debuggable
@ray.remote
class Quitter:
    def quit(self) -> None:
        os._exit(3)


@pytest.mark.usefixtures("ray_session")
def test_each_task_error_is_linked_to_its_own_call_or_to_none() -> None:
    """One error type from three functions: each explanation links its own call.

    The function, message and traceback line are that call's; a plain Ray task's error
    links no call at all.
    """
    errors = {}
    for name, ref in [
        ("parse_row", parse_row.remote("nine")),
        ("parse_price", parse_price.remote("ten")),
        ("plain", plain_parse.remote("eleven")),
    ]:
        with pytest.raises(ValueError, match=r"could not convert|invalid literal") as raised:
            ray.get(ref)
        errors[name] = raised.value
    row, price = explain(errors["parse_row"]), explain(errors["parse_price"])
    assert row.call is not None
    assert row.call.function.endswith(".parse_row")
    assert "'nine'" in (row.call.error or "")
    assert price.call is not None
    assert price.call.function.endswith(".parse_price")
    assert "    return float(text)" in str(price)
    plain = explain(errors["plain"])
    assert plain.call is None  # not debuggable: no record, and no other call's traceback
    assert "in plain_parse" in plain.what  # named from the error's own text

    # The text of the error as `print(e)` shows it (no class name), in Ray's colours.
    coloured = f"\x1b[36mray::parse_price()\x1b[39m {str(errors['parse_price']).split(')', 1)[1]}"
    assert explain(coloured).call == price.call


@pytest.mark.usefixtures("ray_session")
def test_an_actor_that_exits_is_not_called_out_of_memory() -> None:
    quitter = Quitter.remote()
    with pytest.raises(ray.exceptions.ActorDiedError) as raised:
        ray.get(quitter.quit.remote())
    explained = explain(raised.value)
    assert explained.kind == "Actor died"
    assert "memory" not in explained.what.split("Ray's records")[0]
    assert "os._exit()" in explained.what  # Ray's record: the process vanished
    assert explained.call is not None
    assert explained.call.function.endswith(".Quitter.quit")


@debuggable
@ray.remote
def produce() -> bytes:
    return b"x" * 10**6


@pytest.mark.usefixtures("ray_session")
def test_a_lost_object_is_traced_to_the_task_that_made_it() -> None:
    """An object error carries the object's id, which starts with its task's: that call.

    The error is Ray's own class, built as Ray builds it for this object (an owner's death
    reaches ray.get only once the raylet has freed the copy: a race no test should wait on).
    """
    ref = produce.remote()
    assert len(ray.get(ref)) == 10**6
    error = ray.exceptions.OwnerDiedError(ref.hex(), None, "pipeline.py:12")
    explained = explain(error)
    assert explained.kind == "Owner died"
    assert explained.call is not None
    assert explained.call.function.endswith(".produce")
    assert explained.call.task_id == ref.task_id().hex()
    assert f"It was task {ref.task_id().hex()[:16]}: {explained.call.function}" in explained.what
    # Logged as text, without its class: the same explanation and the same call.
    from_text = explain(str(error))
    assert (from_text.kind, from_text.call) == (explained.kind, explained.call)


# Ray Data pipelines as users write them, each failing as plain Ray Data fails: a UDF that
# captures a sqlite connection (it cannot be pickled), one that raises on its batches.
_DATA_PROGRAMS = {
    "captures a connection": (
        "import sqlite3, ray\n"
        "conn = sqlite3.connect(':memory:')\n"
        "def enrich(batch):\n"
        "    conn.execute('select 1')\n"
        "    return batch\n"
        "ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)\n"
        "ray.data.range(100).map_batches(enrich).take_all()\n"
    ),
    "raises on a batch": (
        "import ray\n"
        "def parse(batch):\n"
        "    raise ValueError('bad row 7')\n"
        "ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)\n"
        "ray.data.range(10).map_batches(parse).take_all()\n"
    ),
}


class TestRayDataErrors:
    """Plain Ray Data's own output, pasted into raytrace-kit explain: named for what it is."""

    @pytest.mark.parametrize(
        ("program", "kind", "words"),
        [
            ("captures a connection", "Serialization: a Ray Data UDF cannot be shipped",
             "it captures a sqlite3.Connection"),
            ("raises on a batch", "A Ray Data UDF failed",
             "parse raised ValueError: bad row 7 on a batch at {script}:3; Ray Data failed the "
             "dataset after 1 of 1 attempt(s)"),
        ],
    )  # fmt: skip
    def test_explained_from_rays_output(
        self, tmp_path: Path, program: str, kind: str, words: str
    ) -> None:
        """The pipeline run with plain Ray (no kit), its stderr explained."""
        script = tmp_path / "pipeline.py"
        script.write_text(_DATA_PROGRAMS[program])
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
        ran = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert ran.returncode == 1, ran.stderr[-2000:]  # as plain Ray Data fails
        done = helpers.run_cli("explain", stdin=ran.stderr)
        assert done.returncode == 0, done.stdout
        assert done.stdout.startswith(f"{kind}: "), done.stdout
        assert words.format(script=script) in done.stdout.splitlines()[0]
