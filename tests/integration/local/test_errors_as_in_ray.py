"""Errors, retries and exits in local mode against plain Ray: the same outcome.

Each body runs twice, with plain Ray and in local mode: the same value, or the same
exception in the same place, after as many attempts. The first class runs local mode
beside the running cluster; the table of the second runs it with Ray shut down.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import ray

from raytrace_kit import debuggable, local_mode
from tests.helpers import AgainstPlainRay, Body, Remote, events_of, outcome


def flaky(counter: str, failures: int, error: str) -> int:
    """Fails ``failures`` times (counted in a file, as attempts may run anywhere), then works.

    Each attempt also notes the task id it runs as (``COUNTER.tasks``).
    """
    path = Path(counter)
    seen = int(path.read_text()) if path.exists() else 0
    path.write_text(str(seen + 1))
    with Path(f"{counter}.tasks").open("a") as tasks:
        tasks.write(f"{ray.get_runtime_context().get_task_id()}\n")
    if seen < failures:
        raise {"KeyError": KeyError, "ValueError": ValueError}[error](f"attempt {seen}")
    return seen


RETRY_ROWS = [
    pytest.param({"max_retries": 2, "retry_exceptions": True}, 2, "KeyError", id="retried"),
    pytest.param({"max_retries": 1, "retry_exceptions": True}, 2, "KeyError", id="too-few"),
    pytest.param({"max_retries": 3}, 1, "KeyError", id="not-by-default"),
    pytest.param({"retry_exceptions": [KeyError]}, 1, "ValueError", id="other-type"),
    pytest.param({"retry_exceptions": [KeyError]}, 2, "KeyError", id="listed-type"),
]


@pytest.mark.usefixtures("ray_session")
class TestWithRayRunning:
    """Each body with plain Ray, then in local mode beside the running cluster."""

    @pytest.mark.parametrize(("options", "failures", "error"), RETRY_ROWS)
    def test_retries_as_ray(
        self, tmp_path: Path, options: dict[str, Any], failures: int, error: str
    ) -> None:
        """retry_exceptions and max_retries: the same result or error, after as many attempts."""

        def body(remote: Any, counter: Path) -> Callable[[], Any]:
            ref = remote.options(**options).remote(str(counter), failures, error)
            return lambda: (ray.get(ref), int(counter.read_text()))

        plain = outcome(lambda: body(ray.remote(flaky), tmp_path / "plain"))
        with local_mode():
            local = outcome(lambda: body(debuggable(ray.remote(flaky)), tmp_path / "local"))
        assert local == plain
        attempts = int((tmp_path / "local").read_text())
        assert attempts == int((tmp_path / "plain").read_text())
        # Each local attempt is its own call, numbered as Ray numbers attempts.
        ends = events_of(flaky, "call.end")
        assert [e["attempt"] for e in ends] == list(range(attempts))
        # A retry is the same task, with the same id, for the code and in the events (the
        # report joins attempts on it: a task a retry saved did not fail in the end).
        seen = {
            side: Path(f"{tmp_path / side}.tasks").read_text().split()
            for side in ("plain", "local")
        }
        assert [len(ids) for ids in seen.values()] == [attempts, attempts]
        assert [len(set(ids)) for ids in seen.values()] == [1, 1]
        assert {e["task_id"] for e in ends} == set(seen["local"])


# --- what the rows call (module level, so that Ray's workers can import them) ---


class UnpicklableError(Exception):
    def __init__(self, lock: Any) -> None:
        super().__init__("cannot travel")
        self.lock = lock


def raises_unpicklable() -> None:
    raise UnpicklableError(threading.Lock())


def appends_then_fails(items: list[int], counter: str) -> list[int]:
    """Mutates its argument, then fails the first two attempts."""
    items.append(len(items))
    path = Path(counter)
    seen = int(path.read_text()) if path.exists() else 0
    path.write_text(str(seen + 1))
    if seen < 2:
        raise KeyError(f"attempt {seen}")
    return items


def exits() -> None:
    sys.exit(3)


def bad() -> None:
    raise ValueError("bad")


def gets_a_failed_child(counter: str, local: bool) -> None:
    """Counts its attempts, then re-raises its child's error (RayTaskError(ValueError))."""
    path = Path(counter)
    path.write_text(str(int(path.read_text()) + 1 if path.exists() else 1))
    child = debuggable(ray.remote(bad)) if local else ray.remote(bad)
    ray.get(child.options(max_retries=0).remote())


class Holder:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


class Flaky:
    def __init__(self) -> None:
        self.calls = 0

    def work(self) -> int:
        self.calls += 1
        if self.calls < 3:
            raise ValueError(f"call {self.calls}")
        return self.calls


class Leaver:
    def leave(self) -> None:
        ray.actor.exit_actor()

    def ping(self) -> str:
        return "pong"


# --- the rows: each takes `remote` (ray.remote, or debuggable(ray.remote(...))) ---


def unpicklable_exception(remote: Remote) -> Body:
    ref = remote(raises_unpicklable).remote()

    def body() -> Any:
        try:
            ray.get(ref)
        except UnpicklableError:
            return "the live original came back"
        return None

    return body


def actor_retries_with_retry_exceptions(remote: Remote) -> Body:
    flaky = remote(Flaky).options(max_task_retries=2).remote()
    ref = flaky.work.options(retry_exceptions=True).remote()
    return lambda: ray.get(ref)


def actor_does_not_retry_exceptions_by_default(remote: Remote) -> Body:
    flaky = remote(Flaky).options(max_task_retries=2).remote()
    ref = flaky.work.remote()
    return lambda: ray.get(ref)


def exit_actor_ends_the_call(remote: Remote) -> Body:
    leaver = remote(Leaver).remote()
    ref = leaver.leave.remote()
    return lambda: ray.get(ref, timeout=30)


def exit_actor_then_call(remote: Remote) -> Body:
    leaver = remote(Leaver).remote()
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(leaver.leave.remote(), timeout=30)
    return lambda: ray.get(leaver.ping.remote(), timeout=30)


def retries_get_fresh_arguments(remote: Remote, tmp: Path) -> Body:
    options = {"max_retries": 2, "retry_exceptions": [KeyError]}
    ref = remote(appends_then_fails).options(**options).remote([], str(tmp / "count"))
    return lambda: ray.get(ref)


def actor_created_with_a_failed_argument(remote: Remote) -> Body:
    """The handle comes back; its calls raise ActorDiedError naming the creation's error."""
    holder = remote(Holder).remote(remote(bad).remote())

    def body() -> Any:
        try:
            return ray.get(holder.get.remote(), timeout=60)
        except ray.exceptions.ActorDiedError as died:
            text = str(died)
            return (
                "ActorDiedError",
                "raised in its creation task" in text,
                "ValueError: bad" in text,
            )

    return body


def retried_on_a_childs_error(remote: Remote, tmp: Path) -> Body:
    """A child's error re-raised by ray.get is the call's own: retry_exceptions decides."""
    options = {"max_retries": 2, "retry_exceptions": [ValueError]}
    counter = tmp / "count"
    ref = (
        remote(gets_a_failed_child)
        .options(**options)
        .remote(str(counter), remote is not ray.remote)
    )

    def body() -> Any:
        with pytest.raises(ValueError, match="bad"):
            ray.get(ref, timeout=60)
        return int(counter.read_text())  # attempts: 3, as max_retries=2 allows

    return body


def sys_exit_in_a_task(remote: Remote) -> Body:
    ref = remote(exits).options(max_retries=0).remote()
    return lambda: ray.get(ref, timeout=60)


class TestWithRayShutDown(AgainstPlainRay):
    """Each row with plain Ray first, then in strict local mode with Ray shut down."""

    ROWS: ClassVar[list[Callable[..., Body]]] = [
        unpicklable_exception,
        actor_retries_with_retry_exceptions,
        actor_does_not_retry_exceptions_by_default,
        exit_actor_ends_the_call,
        exit_actor_then_call,
        retries_get_fresh_arguments,
        sys_exit_in_a_task,
        actor_created_with_a_failed_argument,
        retried_on_a_childs_error,
    ]
