"""Whole programs, unedited: ``raytrace-kit run`` and ``instrument()``, and the driver's record.

The programs run as users run them: real subprocesses (``python -m raytrace_kit run``),
attached to the session's shared Ray instance, their output, exit status and traceback
compared with the same program run by ``python``, and their events with the same program
decorated by hand.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable
from tests import helpers

PROGRAMS = Path(__file__).parent.parent / "programs"


def _python(*arguments: str, env: dict[str, str] | None = None, cwd: Path = PROGRAMS) -> Any:
    return subprocess.run(
        [sys.executable, *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def _kit_run(*arguments: str, env: dict[str, str] | None = None, cwd: Path = PROGRAMS) -> Any:
    return _python("-m", "raytrace_kit", "run", *arguments, env=env, cwd=cwd)


def _attached(tmp_path: Path, name: str) -> dict[str, str]:
    """Environment of a program attached to the shared Ray, writing its job id to a file."""
    helpers.start_shared_ray()
    return {
        "SHOP_RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "SHOP_JOB_FILE": str(tmp_path / name),
    }


def _log_dir() -> Path:
    return raytrace_kit.log_dir()


def _this_test(event: str, path: Path | None = None) -> list[dict[str, Any]]:
    """Events of one name written during the current test (the session is shared)."""
    since = helpers.window_start()
    found = raytrace_kit.read_events(path)
    return [e for e in found if e["timestamp"] >= since and e.get("event") == event]


def _calls_of_job(job_id: str) -> collections.Counter[tuple[Any, ...]]:
    """Each call of one job, as (function, kind, status, error type, parent's function)."""
    ends = [
        event
        for event in raytrace_kit.read_events(_log_dir())
        if event.get("event") == "call.end" and event.get("job_id") == job_id
    ]
    function_of = {event["call_id"]: event["function"] for event in ends}
    return collections.Counter(
        (
            e["function"],
            e.get("kind"),
            e["status"],
            e.get("error_type"),
            function_of.get(e.get("parent_call_id") or "", e.get("parent_call_id")),
        )
        for e in ends
    )


def _without_ids(text: str) -> str:
    """Output with pids and Ray's log lines out: they differ from run to run."""
    text = re.sub(r"pid=\d+", "pid=<pid>", text)
    return "\n".join(line for line in text.splitlines() if not re.match(r"^\d{4}-\d\d-\d\d ", line))


# Python 3.10 re-raises the traceback a wrapper caught, the wrapper's frame in it: the kit's
# frames show there (docs/reliability.md), from 3.11 on they do not.
KIT_FRAMES_SHOW = sys.version_info < (3, 11)
KIT_DIR = str(Path(raytrace_kit.__file__).parent)


def _without_kit_frames(text: str) -> str:
    """A traceback's text less the kit's frames (each a ``File`` line and its source line)."""
    kept: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.lstrip().startswith(f'File "{KIT_DIR}/'):
            next(lines, None)  # the frame's source line
            continue
        kept.append(line)
    return "\n".join(kept)


class TestRunCommand:
    """``raytrace-kit run``: the program's own output and exit; the decorated program's events."""

    def test_shop_runs_as_python_and_records_as_decorated(
        self, ray_session: None, tmp_path: Path
    ) -> None:
        """10 undecorated remotes in 4 modules: same stdout, stderr, exit, and events."""
        plain = _python("shop_main.py", "tuesday", env=_attached(tmp_path, "plain"))
        run = _kit_run("shop_main.py", "tuesday", env=_attached(tmp_path, "run"))
        decorated = _python(
            "shop_main.py", "tuesday", env={**_attached(tmp_path, "hand"), "SHOP_DECORATE": "1"}
        )
        assert plain.returncode == 1, plain.stderr
        assert (run.returncode, decorated.returncode) == (1, 1)
        assert run.stdout == plain.stdout == decorated.stdout
        assert "ledger [50, 80, 120]" in run.stdout
        kit_stderr = _without_ids(run.stderr)
        if KIT_FRAMES_SHOW:  # the kit's frames show, and are the only difference
            shown, kit_stderr = kit_stderr, _without_kit_frames(kit_stderr)
            assert kit_stderr != shown
        assert kit_stderr == _without_ids(plain.stderr)
        source = (PROGRAMS / "shop_main.py").read_text().splitlines()
        line = next(n for n, text in enumerate(source, 1) if text.startswith("ray.get(close"))
        assert f'File "{PROGRAMS / "shop_main.py"}", line {line}, in <module>' in run.stderr
        assert run.stderr.rstrip().endswith("RuntimeError: books for tuesday do not balance")

        by_run = _calls_of_job((tmp_path / "run").read_text())
        by_hand = _calls_of_job((tmp_path / "hand").read_text())
        assert by_run == by_hand
        assert not _calls_of_job((tmp_path / "plain").read_text())
        functions = {key[0] for key in by_run}
        assert functions >= {
            "shop.catalog.parse", "shop.catalog.price", "shop.catalog.Inventory.take",
            "shop.orders.total", "shop.orders.Checkout.pay", "shop.orders.receipts",
            "shop.orders.broken", "shop.books.Ledger.record", "shop.books.summarize",
            "shop.books.close_books",
        }  # fmt: skip
        # Calls made inside calls, in workers, are instrumented too, under their parent.
        assert by_run["shop.catalog.price", "task", "ok", None, "shop.orders.total"] == 4
        assert by_run["shop.catalog.price", "task", "ok", None, "shop.books.Ledger.record"] == 3
        assert by_run["shop.books.close_books", "task", "error", "RuntimeError", None] == 1

    def test_exit_status_argv_and_main_as_python(self, tmp_path: Path) -> None:
        """sys.exit(n), sys.argv, __file__, __name__ and sys.path[0]: those of python SCRIPT."""
        script = tmp_path / "tool.py"
        script.write_text(
            "import sys\n"
            "print(sys.argv, __name__, __file__, sys.path[0])\n"
            "sys.exit(int(sys.argv[2]))\n"
        )
        plain = _python("tool.py", "--flag", "3", cwd=tmp_path)
        run = _kit_run("tool.py", "--flag", "3", cwd=tmp_path)
        assert plain.returncode == 3
        assert (run.returncode, run.stdout, run.stderr) == (3, plain.stdout, plain.stderr)
        after_dashes = _kit_run("--log-args", "--", "tool.py", "--flag", "0", cwd=tmp_path)
        assert after_dashes.returncode == 0, after_dashes.stderr
        assert "['tool.py', '--flag', '0']" in after_dashes.stdout

    def test_module_runs_as_python_dash_m(self, tmp_path: Path) -> None:
        package = tmp_path / "tools"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "hello.py").write_text(
            "import sys\nprint(__name__, sys.argv[1:])\nraise SystemExit('bye')\n"
        )
        plain = _python("-m", "tools.hello", "a", cwd=tmp_path)
        run = _kit_run("-m", "tools.hello", "a", cwd=tmp_path)
        assert plain.returncode == 1
        assert (run.returncode, run.stdout, run.stderr) == (1, plain.stdout, plain.stderr)
        assert run.stdout == "__main__ ['a']\n"

    def test_bad_options_are_usage_errors_before_the_program_runs(self, tmp_path: Path) -> None:
        script = tmp_path / "never.py"
        script.write_text("print('ran')\n")
        bad_flag = _kit_run("--profile", "perf", "never.py", cwd=tmp_path)
        assert bad_flag.returncode == 2
        assert "invalid choice: 'perf'" in bad_flag.stderr
        bad_env = _kit_run("never.py", cwd=tmp_path, env={"RAYTRACE_KIT_INSTRUMENT": "colour=red"})
        assert bad_env.returncode == 2
        assert "unknown raytrace_kit option 'colour'" in bad_env.stderr
        assert "ran" not in bad_env.stdout
        nothing = _kit_run(cwd=tmp_path)
        assert nothing.returncode == 2
        assert "name a script" in nothing.stderr


_LOOP = """\
import os, ray

@ray.remote
def step(x):
    return x + 1

ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
total = 0
for x in range(6):
    total += ray.get(step.remote(x))
print(total)
"""

_STRAGGLER = """\
import os, time, ray

@ray.remote
class Count:
    def __init__(self):
        self.done = 0
    def one(self):
        self.done += 1
    def done_count(self):
        return self.done

@ray.remote
def part(i, counter):
    if i == 5:  # the straggler: it starts its 3 s once the other seven are done
        while ray.get(counter.done_count.remote()) < 7:
            time.sleep(0.01)
        time.sleep(3)
    else:
        ray.get(counter.one.remote())
    return i

ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
counter = Count.remote()
parts = [part.remote(i, counter) for i in range(8)]
print(sum(ray.get(parts)))
"""


class TestDriverRecord:
    """The driver's own record: the loop it waits in, the straggler it waits on."""

    def _report_of(self, script: Path, *options: str) -> Any:
        done = _kit_run(*options, script.name, cwd=script.parent, env=_attached(script.parent, "j"))
        assert done.returncode == 0, done.stderr
        return raytrace_kit.report(_log_dir())

    def test_a_get_in_a_loop_names_its_line(self, ray_session: None, tmp_path: Path) -> None:
        script = tmp_path / "loop.py"
        script.write_text(_LOOP)
        made = self._report_of(script)
        (loop,) = [f for f in made.findings if f.kind == "driver_loop" and str(script) in f.subject]
        assert loop.subject == f"{script}:10"
        # The report's text, as the user reads it: the line, and the calls it waited on.
        (line,) = [
            text
            for text in str(made).splitlines()
            if text.startswith("- ray.get in a loop in the driver: ") and "loop.py:10 " in text
        ]
        assert " loop.py:10 waited on 6 calls of __main__.step one at a time: " in line
        assert "6 ray.get calls at" in loop.evidence
        assert "ray.get the list" in loop.fix
        runs = [r for r in made.driver["runs"] if r.get("cwd") == str(tmp_path)]
        assert [(r["script"], r["exit_status"]) for r in runs] == [("loop.py", 0)]

    def test_the_straggler_the_driver_waited_on(self, ray_session: None, tmp_path: Path) -> None:
        script = tmp_path / "straggle.py"
        script.write_text(_STRAGGLER)
        made = self._report_of(script, "--log-args")
        found = [
            f
            for f in made.findings
            if f.kind == "driver_straggler" and "straggle.py:25" in f.evidence
        ]
        (straggler,) = found
        assert straggler.subject == "__main__.part"
        assert "blocked" in straggler.evidence
        assert "on 8 calls; 7 were done" in straggler.evidence
        assert "arguments ['5'," in straggler.evidence  # --log-args: the straggler's input

        trace = json.loads(raytrace_kit.timeline(_log_dir(), tmp_path / "t.json").read_text())
        events = trace["traceEvents"]
        lanes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        (lane,) = [pid for pid, name in lanes.items() if name.startswith("driver · straggle.py")]
        gets = [e for e in events if e.get("pid") == lane and e.get("name") == "ray.get"]
        assert [g["args"]["where"] for g in gets] == [f"{script}:25"]
        arrows = [e for e in events if e.get("ph") == "s" and e.get("pid") == lane]
        assert len(arrows) >= 8  # one per call it submitted (the counter's too)


@ray.remote
def _double(x: int) -> int:
    return 2 * x


@ray.remote
def _pair(x: int) -> tuple[int, int]:
    return x, -x


@ray.remote
def _count_to(n: int):
    yield from range(n)


@ray.remote
def _fan(n: int) -> int:
    return sum(ray.get([_double.remote(i) for i in range(n)]))


@ray.remote
def _fails(message: str) -> None:
    raise ValueError(message)


@ray.remote
class _Tally:
    def __init__(self, start: int) -> None:
        self.value = start

    def add(self, k: int) -> int:
        self.value += k
        return self.value


@ray.remote
class _AsyncEcho:
    async def echo(self, text: str) -> str:
        return text.upper()


def _first_call(handle: Any, method: str, *args: Any) -> Any:
    """The value of ``handle.<method>.remote(*args)`` on a new actor, its handle held.

    Ray before 2.50 (2.40 and 2.44 measured) loses a handle nothing holds before its
    method is submitted ("Lost reference to actor"); Ray 2.50 and later keep it.
    """
    return ray.get(getattr(handle, method).remote(*args))


def _rows(run: str) -> dict[str, Any]:
    """Each row submits with the objects as Ray made them, and returns what it got."""
    return {
        "task": lambda: ray.get(_double.remote(21)),
        "options": lambda: ray.get(_double.options(num_cpus=1, name="twice").remote(4)),
        "two returns": lambda: ray.get(list(_pair.options(num_returns=2).remote(3))),
        "generator": lambda: [ray.get(r) for r in _count_to.remote(3)],
        "nested": lambda: ray.get(_fan.remote(3)),
        "actor": lambda: _first_call(_Tally.remote(1), "add", 2),
        "async actor": lambda: _first_call(_AsyncEcho.remote(), "echo", "hi"),
        "named actor": lambda: _first_call(
            _Tally.options(name=f"tally-{run}", get_if_exists=True).remote(5), "add", 1
        ),
        "dag": lambda: ray.get(_double.bind(_double.bind(1)).execute()),
        "error": lambda: helpers.outcome_without_ids(lambda: ray.get(_fails.remote("no"))),
        "isinstance kept": lambda: (
            type(_double).__name__, isinstance(_double, ray.remote_function.RemoteFunction)
        ),
    }  # fmt: skip


@pytest.fixture(scope="class")
def _workers_renewed_after() -> Iterator[None]:
    """Shut the shared Ray down after the class: its workers keep instrument()'s hook.

    In a program, workers serve one job and its one instrument(); the shared instance
    serves the whole test session, whose later tests expect workers without the hook.
    """
    yield
    if ray.is_initialized():
        ray.shutdown()


@pytest.mark.usefixtures("_workers_renewed_after")
class TestInstrumentInProcess:
    """``instrument()`` in a running program: Ray's results, the kit's records."""

    @pytest.mark.filterwarnings("ignore:DAGNode.execute:DeprecationWarning")
    def test_outcomes_as_plain_ray_and_every_call_recorded(self, ray_session: None) -> None:
        plain = {name: helpers.outcome_without_ids(row) for name, row in _rows("plain").items()}
        raytrace_kit.instrument()
        kit = {name: helpers.outcome_without_ids(row) for name, row in _rows("kit").items()}
        assert kit == plain
        names = collections.Counter(
            e["function"].rsplit(".", 2)[-1] for e in _this_test("call.end", _log_dir())
        )
        # Every row's calls, from the second run only (the plain run wrote nothing).
        assert names["_double"] == 1 + 1 + 3 + 2  # task, options, nested (3), dag (2)
        assert names["_pair"] == names["_count_to"] == names["_fan"] == names["_fails"] == 1
        assert names["add"] == 2
        assert names["echo"] == 1

    def test_objects_decorated_by_hand_keep_their_options(self, ray_session: None) -> None:
        own = debuggable(_double, log_args=True)
        raytrace_kit.instrument(log_args=False)
        assert ray.get([own.remote(5), _double.remote(6)]) == [10, 12]
        starts = [e for e in _this_test("call.start") if e["function"].endswith("._double")]
        assert sorted(("args" in e, e.get("args")) for e in starts) == [
            (False, None),
            (True, ["5"]),
        ]

    @pytest.mark.compat
    def test_tracebacks_through_ray_get_are_plain_rays(self, ray_session: None) -> None:
        """The driver's ray.get hook leaves no frame of its own in what the user sees."""

        def frames() -> list[tuple[str, str]]:
            with pytest.raises(ValueError, match="kaput") as caught:
                ray.get(_fails.remote("kaput"))
            tb = traceback.extract_tb(caught.value.__traceback__)
            return [(Path(frame.filename).name, frame.name) for frame in tb]

        plain = frames()
        raytrace_kit.instrument()
        kit = frames()
        if KIT_FRAMES_SHOW:  # the hook's own frame, after the user's line (docs/reliability.md)
            assert kit.pop(1) == ("record.py", "hooked")
        assert kit == plain
        assert ("worker.py", "get") in plain

    def test_local_mode_runs_plain_remotes_here(self) -> None:
        """instrument() then local mode: the program's remotes run in this process, unwarned."""
        raytrace_kit.instrument()
        with raytrace_kit.local_mode(strict=True):
            assert ray.get(_fan.remote(2)) == 2
            assert ray.get(_Tally.remote(1).add.remote(1)) == 2
        local = _this_test("call.end")
        assert {e["mode"] for e in local} == {"local"}
        assert {e["pid"] for e in local} == {os.getpid()}
