"""Ray's own local mode (``ray.init(local_mode=True)``, Ray 2.40 to 2.54) and the kit's.

A program that runs under Ray's local mode gets the same results and errors from its
debuggable functions as from plain ones, and the kit records each call, with the ids Ray
can give there: none of a task or an actor, as the driver runs every call. The kit's own
``local_mode()`` inside it runs debuggable calls itself, with ids of their own, and leaves
plain calls to Ray's. Ray 2.55 removed its local mode (``ray.init`` raises there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import ray

from raytrace_kit import open_session

RAY_HAS_LOCAL_MODE = tuple(int(part) for part in ray.__version__.split(".")[:2]) < (2, 55)

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(
        not RAY_HAS_LOCAL_MODE, reason=f"Ray {ray.__version__} has no local_mode (removed in 2.55)"
    ),
]

PROGRAM = """
import json, os, sys
import ray
from raytrace_kit import debuggable, local_mode


def double(x):
    return 2 * x


def fails(x):
    raise ValueError(f"bad input {x}")


class Tally:
    def __init__(self, start):
        self.value = start

    def add(self, k):
        self.value += k
        return self.value


class KitTally(Tally):
    # Ray's local mode finds an actor's methods by its class's name: one name, one class.
    pass


REMOTES = {
    "plain": {f.__name__: ray.remote(f) for f in (double, fails)},
    "kit": {f.__name__: debuggable(ray.remote(f)) for f in (double, fails)},
}
REMOTES["plain"]["Tally"] = ray.remote(Tally)
REMOTES["kit"]["Tally"] = debuggable(ray.remote(KitTally))


def fan_plain(n):
    return sum(ray.get([REMOTES["plain"]["double"].remote(i) for i in range(n)]))


def fan_kit(n):
    return sum(ray.get([REMOTES["kit"]["double"].remote(i) for i in range(n)]))


REMOTES["plain"]["fan"] = ray.remote(fan_plain)
REMOTES["kit"]["fan"] = debuggable(ray.remote(fan_kit))


def outcome(body):
    try:
        return ["value", body()]
    except Exception as error:
        cause = getattr(error, "cause", None) or error
        return [type(error).__name__, type(cause).__name__, str(cause).splitlines()[0]]


def rows(r):
    tally = r["Tally"].remote(10)
    return {
        "task": outcome(lambda: ray.get(r["double"].remote(21))),
        "options": outcome(lambda: ray.get(r["double"].options(num_cpus=1).remote(2))),
        "error": outcome(lambda: ray.get(r["fails"].remote(7))),
        "nested": outcome(lambda: ray.get(r["fan"].remote(3))),
        "actor": outcome(lambda: ray.get([tally.add.remote(1), tally.add.remote(2)])),
    }


ray.init(local_mode=True, num_cpus=1, include_dashboard=False, log_to_driver=False)
seen = {"plain": rows(REMOTES["plain"]), "kit": rows(REMOTES["kit"])}
with local_mode():  # the kit's own, inside Ray's: debuggable calls run here, as the kit's
    seen["kit inside kit local mode"] = rows(REMOTES["kit"])
seen["pid"] = os.getpid()
ray.shutdown()
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The program's outcomes, and where its events are."""
    root = tmp_path_factory.mktemp("ray_local_mode")
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "RAYTRACE_LOG_DIR"}}
    env["RAYTRACE_LOG_DIR"] = str(root / "events")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), root / "events"


def test_debuggable_calls_give_what_plain_calls_give(run: tuple[dict[str, Any], Path]) -> None:
    """Values and errors, task, actor, nested and .options() calls: as plain Ray's."""
    seen, _ = run
    assert seen["kit"] == seen["plain"]
    assert seen["kit inside kit local mode"] == seen["plain"]
    assert seen["plain"]["task"] == ["value", 42]
    assert seen["plain"]["actor"] == ["value", [11, 13]]
    assert seen["plain"]["error"][1:] == ["ValueError", "bad input 7"]


def test_calls_are_recorded_without_ids_ray_cannot_give(run: tuple[dict[str, Any], Path]) -> None:
    """Under Ray's local mode, each call has its events, in the driver, without task ids."""
    seen, events = run
    calls = [c for c in open_session(events).calls() if c.mode == "ray"]
    names = Counter(c.function.rsplit(".", 1)[-1] for c in calls)
    assert names == {"double": 1 + 1 + 3, "fails": 1, "fan_kit": 1, "__init__": 1, "add": 2}
    assert {c.pid for c in calls} == {seen["pid"]}
    assert {(c.task_id, c.actor_id) for c in calls} == {(None, None)}
    (failed,) = [c for c in calls if c.status == "error"]
    assert failed.function.endswith(".fails")
    assert failed.error_type == "ValueError"


def test_the_kits_local_mode_runs_its_calls_with_ids(run: tuple[dict[str, Any], Path]) -> None:
    """Inside raytrace_kit.local_mode(), the kit runs debuggable calls: ids of their own."""
    _, events = run
    calls = [c for c in open_session(events).calls() if c.mode == "local"]
    names = Counter(c.function.rsplit(".", 1)[-1] for c in calls)
    assert names == {"double": 1 + 1 + 3, "fails": 1, "fan_kit": 1, "__init__": 1, "add": 2}
    assert len({c.task_id for c in calls}) == len(calls)
    assert len({c.actor_id for c in calls if c.function.endswith(("add", "__init__"))}) == 1
