"""Which recorded call an error came from (``_reports.explain.linking``), on files written here.

Errors are Ray's own, made by Ray's exception classes (no cluster needed for that); the
calls are written by the kit's own encoder and writer into a temporary session.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ray.core.generated.common_pb2 import ActorDiedErrorContext
from ray.exceptions import ActorDiedError, RayTaskError

import raytrace_kit
from raytrace_kit._reports.explain import linking
from raytrace_kit._reports.reading import Call, Session
from tests.helpers import EventFile

RECORDED = Path(__file__).parent.parent / "data" / "ray_logs_oom" / "gcs_server.out"
ACTOR = "8d0d7d4c0b6a2b4f1a2b3c4d01000000"
EXIT = (
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file."
)


def ray_task_error(function: str, pid: int = 3882) -> str:
    """The text of Ray's RayTaskError for a ValueError raised in ``function``."""
    try:
        int("x")
    except ValueError as error:
        text = "".join(traceback.format_exception(error))
        made = RayTaskError(function, text, error, proctitle=f"ray::{function}", pid=pid)
    return str(made)


def actor_died_error() -> str:
    """The text of Ray's ActorDiedError for an actor whose worker process died."""
    context = ActorDiedErrorContext(
        error_message=EXIT,
        actor_id=bytes.fromhex(ACTOR),
        class_name="Holder",
        pid=4242,
        ray_namespace="jobs",
        node_ip_address="10.0.0.1",
    )
    return str(ActorDiedError(context))


def dead_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def datetime_now() -> str:
    """Now, as event timestamps are written."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def function_of(call: Call | None) -> tuple[str, int | None, str | None] | None:
    """A found call as (function, pid, error message), to compare in one assertion."""
    return None if call is None else (call.function, call.pid, call.error)


class TestErrorTexts:
    """What an error's text names: its function and pid, its actor, the worker's exit."""

    @pytest.mark.parametrize(
        ("function", "pid"),
        [("parse", 3882), ("Counter.add", 77)],
        ids=["task", "actor method"],
    )
    def test_task_identity_from_rays_task_error(self, function: str, pid: int) -> None:
        """The function (``parse`` or ``Class.method``) and pid Ray prints, colours and all."""
        text = ray_task_error(function, pid)
        assert "\x1b[" in text  # Ray colours the task's name
        assert linking.task_identity(text) == (function, pid)

    def test_a_task_without_a_pid(self) -> None:
        """A task named without its pid: the function alone."""
        assert linking.task_identity("ray::parse() failed") == ("parse", None)

    def test_a_text_naming_no_task_names_nothing(self) -> None:
        """No ``ray::name()``: no function, no pid."""
        assert linking.task_identity(actor_died_error()) == (None, None)

    def test_actor_and_exit_of_rays_actor_died_error(self) -> None:
        """The actor's id, and the worker's exit type and detail, in Ray's words."""
        text = actor_died_error()
        assert linking.actor_of(text) == ACTOR
        death = linking.text_death(text)
        assert death is not None
        assert death.exit_type == "SYSTEM_ERROR"
        assert death.detail.startswith("Worker unexpectedly exits with a connection error")

    def test_no_exit_in_a_task_error(self) -> None:
        """A task's error says nothing of a worker's exit: none is made up."""
        text = ray_task_error("parse")
        assert linking.text_death(text) is None
        assert linking.actor_of(text) is None

    def test_the_worker_an_out_of_memory_kill_names(self) -> None:
        """The worker id Ray's memory monitor names (a real Ray log's line)."""
        line = next(x for x in RECORDED.read_text().splitlines() if "Selected to kill" in x)
        assert (
            linking.oom_worker(line) == "ed7d0a793a26269a9269fc75ce277627f7d227bdca6cf2cbde6386d7"
        )
        assert linking.oom_worker(ray_task_error("parse")) is None

    @given(st.text(alphabet=st.characters(blacklist_characters="\x1b")), st.data())
    def test_plain_takes_out_colours_only(self, text: str, data: st.DataObject) -> None:
        """Colour codes anywhere in a text go; everything else stays as it was."""
        code = data.draw(st.sampled_from(["\x1b[36m", "\x1b[39m", "\x1b[1;31m", "\x1b[0m"]))
        at = data.draw(st.integers(0, len(text)))
        assert linking.plain(text[:at] + code + text[at:]) == text


PARSE_1 = ("jobs.parse", 101, "bad row 1")
PARSE_2 = ("jobs.parse", 102, "bad row 2")
# What an error says (its type, function, pid, message) -> the call it is linked to.
LINKS = [
    pytest.param(("ValueError", "parse", 101, None), PARSE_1, id="pid"),
    pytest.param(("ValueError", "parse", None, "bad row 1"), PARSE_1, id="message picks"),
    pytest.param(("ValueError", "parse", None, None), PARSE_2, id="the function's latest"),
    pytest.param(
        ("ValueError", "parse", None, "cut short by Ray"), PARSE_2, id="other message: latest"
    ),
    pytest.param(("ValueError", None, None, "bad row 2\nTraceback"), PARSE_2, id="message"),
    pytest.param(
        ("KeyError", "Counter.add", 102, None), ("jobs.Counter.add", 102, "'k'"), id="method"
    ),
    pytest.param(
        ("ValueError", "sparse", None, None), ("jobs.sparse", 101, "bad row 1"), id="whole name"
    ),
    pytest.param(("ValueError", None, None, None), None, id="only the type: none"),
    pytest.param(("ValueError", None, None, "no such row"), None, id="no such message"),
    pytest.param(("TypeError", "parse", None, None), None, id="another type"),
    pytest.param(("ValueError", "parse", 999, None), None, id="another process"),
]


@pytest.fixture
def session(tmp_path: Path) -> Session:
    """Two processes' failed and finished calls, in this order of start."""
    first, second = EventFile(tmp_path, 101), EventFile(tmp_path, 102)
    first.start("a1", "jobs.parse")
    first.end("a1")
    first.start("a2", "jobs.parse")
    first.end("a2", ValueError("bad row 1"))
    first.start("a3", "jobs.sparse")  # ends like "parse", but is another function
    first.end("a3", ValueError("bad row 1"))
    second.start("b1", "jobs.parse")
    second.end("b1", ValueError("bad row 2"))
    second.start("b2", "jobs.Counter.add", actor_id=ACTOR)
    second.end("b2", KeyError("k"))
    first.close()
    second.close()
    return raytrace_kit.open_session(tmp_path)


class TestFailingCall:
    """``failing_call``: the recorded call that raised, or none rather than a guess."""

    @pytest.mark.parametrize(("said", "expected"), LINKS)
    def test_linked_by_what_the_error_says(
        self,
        session: Session,
        said: tuple[str, str | None, int | None, str | None],
        expected: tuple[str, int, str] | None,
    ) -> None:
        """The type must match, and the function, pid and message where the error names them."""
        assert function_of(linking.failing_call(session, *said)) == expected

    def test_a_real_task_errors_text_links(self, session: Session) -> None:
        """What task_identity reads from Ray's text is enough to link the call."""
        function, pid = linking.task_identity(ray_task_error("parse", 102))
        found = linking.failing_call(session, "ValueError", function, pid, None)
        assert function_of(found) == ("jobs.parse", 102, "bad row 2")


class TestInterruptedCalls:
    """Calls with no end: whose process died, and which actor a dead call was running."""

    @pytest.fixture
    def interrupted(self, tmp_path: Path) -> Session:
        """An actor's call in a process that ended, and a task's in this live process."""
        dead = EventFile(tmp_path, dead_pid())
        dead.start("d1", "jobs.Holder.hold", actor_id=ACTOR)
        dead.close()
        alive = EventFile(tmp_path, os.getpid())
        alive.start("l1", "jobs.still_going")
        alive.close()
        return raytrace_kit.open_session(tmp_path)

    def test_only_calls_of_dead_processes(self, interrupted: Session) -> None:
        """A call whose process still runs is running, not interrupted."""
        calls = linking.interrupted_calls(interrupted)
        assert [(c.function, c.status) for c in calls] == [("jobs.Holder.hold", "interrupted")]

    def test_the_actors_last_call(self, interrupted: Session) -> None:
        """An actor's death is linked to the call it was running; another actor's to none."""
        call = linking.actor_call(interrupted, ACTOR)
        assert call is not None
        assert call.function == "jobs.Holder.hold"
        assert linking.actor_call(interrupted, "ff" * 16) is None


class TestDeathsOf:
    """``deaths_of``: Ray's record of each cut-off call's worker, for several calls at once."""

    def test_each_call_gets_its_workers_death_weighed_by_its_memory(self, tmp_path: Path) -> None:
        """Of two cut-off calls, the one whose worker Ray's memory monitor killed has a death."""
        logs = tmp_path / "logs"
        kit = logs / "raytrace_kit"
        kit.mkdir(parents=True)
        shutil.copy(RECORDED, logs / "gcs_server.out")
        killed, other = EventFile(kit, 201), EventFile(kit, 202)
        oom_worker = "ed7d0a793a26269a9269fc75ce277627f7d227bdca6cf2cbde6386d7"
        killed.identity = dataclasses.replace(killed.identity, worker_id=oom_worker)
        killed.start("k1", "jobs.grow", rss=3 * 2**30)
        other.start("o1", "jobs.other")
        killed.close()
        other.close()
        opened = raytrace_kit.open_session(tmp_path)
        deaths = linking.deaths_of(opened.calls(status="interrupted"), opened)
        assert list(deaths) == ["k1"]
        assert deaths["k1"].kind == "oom"
        assert deaths["k1"].held == 3 * 2**30


class TestStillRunning:
    """``still_running``: the process of a call without an end is alive, and was then."""

    def test_this_process_runs_a_call_started_now(self) -> None:
        """A live Python process that started before the call: still running."""
        started = datetime_now()
        assert linking.still_running(os.getpid(), started)

    @pytest.mark.parametrize(
        ("pid", "started"),
        [
            pytest.param(os.getpid(), "2000-01-01T00:00:00+00:00", id="pid reused since"),
            pytest.param(None, "2000-01-01T00:00:00+00:00", id="no pid"),
            pytest.param(os.getpid(), "", id="no start"),
        ],
    )
    def test_not_running(self, pid: int | None, started: str) -> None:
        """A process younger than the call (its pid reused), or nothing to go on: no."""
        assert not linking.still_running(pid, started)

    def test_a_process_that_ended(self) -> None:
        """An ended process runs nothing."""
        assert not linking.still_running(dead_pid(), datetime_now())
