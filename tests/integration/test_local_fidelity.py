"""Local mode against plain Ray: the same body, the same outcome (issue 11, first items).

Each row runs one body twice: with plain Ray (the shared cluster) and in local mode, and
compares what the program sees: a value, or the exception's type and message, and whether
it came at ``.remote()`` or at ``ray.get``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray

from raytrace_kit import debuggable, local_mode
from tests.helpers import events_of

pytestmark = pytest.mark.usefixtures("ray_session")


def add(a: int, b: int) -> int:
    return a + b


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    def bump(self, by: int = 1) -> int:
        self.value += by
        return self.value

    @staticmethod
    def twice(x: int) -> int:
        return 2 * x


def outcome(body: Callable[[], Any]) -> tuple[str, ...]:
    """("value", v), or (where it raised: "submit"/"get", type, message)."""
    stage = "submit"
    try:
        pending = body()
        stage = "get"
        return ("value", repr(pending()))
    except Exception as error:
        cause = getattr(error, "cause", None) or error
        return (stage, type(cause).__name__, str(cause).split("\n")[0])


def task_too_many_args(remote: Any) -> Callable[[], Any]:
    ref = remote.remote(1, 2, 3)
    return lambda: ray.get(ref)


def task_missing_arg(remote: Any) -> Callable[[], Any]:
    ref = remote.remote(1)
    return lambda: ray.get(ref)


def task_unknown_keyword(remote: Any) -> Callable[[], Any]:
    ref = remote.remote(1, 2, c=3)
    return lambda: ray.get(ref)


def actor_bad_constructor(actor_class: Any) -> Callable[[], Any]:
    handle = actor_class.remote()
    return lambda: ray.get(handle.bump.remote())


def actor_bad_method_call(actor_class: Any) -> Callable[[], Any]:
    handle = actor_class.remote(0)
    ref = handle.bump.remote(1, 2)
    return lambda: ray.get(ref)


def actor_static_method_bad_call(actor_class: Any) -> Callable[[], Any]:
    handle = actor_class.remote(0)
    ref = handle.twice.remote()
    return lambda: ray.get(ref)


def actor_good_calls(actor_class: Any) -> Callable[[], Any]:
    handle = actor_class.remote(10)
    refs = [handle.bump.remote(), handle.bump.remote(by=5), handle.twice.remote(4)]
    return lambda: ray.get(refs)


TASK_ROWS = [task_too_many_args, task_missing_arg, task_unknown_keyword]
ACTOR_ROWS = [
    actor_bad_constructor,
    actor_bad_method_call,
    actor_static_method_bad_call,
    actor_good_calls,
]


@pytest.mark.parametrize("row", TASK_ROWS, ids=lambda r: r.__name__)
def test_task_signatures_checked_at_submission(row: Callable[[Any], Any]) -> None:
    """Arguments that do not fit fail at .remote() with Ray's TypeError, in both."""
    plain = outcome(lambda: row(ray.remote(add)))
    with local_mode():
        local = outcome(lambda: row(debuggable(ray.remote(add))))
    assert local == plain
    assert plain[0] == "submit"


@pytest.mark.parametrize("row", ACTOR_ROWS, ids=lambda r: r.__name__)
def test_actor_signatures_and_calls(row: Callable[[Any], Any]) -> None:
    """Constructors, methods and static methods: same values, same errors, same place."""
    plain = outcome(lambda: row(ray.remote(Counter)))
    with local_mode():
        local = outcome(lambda: row(debuggable(ray.remote(Counter))))
    assert local == plain


def test_duplicate_actor_name() -> None:
    """A taken name is Ray's ActorAlreadyExistsError, with Ray's message, in both."""

    def body(actor_class: Any, name: str) -> Callable[[], Any]:
        first = actor_class.options(name=name).remote(0)
        actor_class.options(name=name).remote(0)
        return lambda: first

    plain = outcome(lambda: body(ray.remote(Counter), "dup-counter"))
    with local_mode():
        local = outcome(lambda: body(debuggable(ray.remote(Counter)), "dup-counter"))
    assert local[:2] == plain[:2] == ("submit", "ActorAlreadyExistsError")
    assert local[2].split("(namespace")[0] == plain[2].split("(namespace")[0]


def test_get_actor_respects_namespaces() -> None:
    """An actor named in one namespace is not found from another, in both."""

    def body(actor_class: Any, name: str) -> Callable[[], Any]:
        actor_class.options(name=name, namespace="elsewhere").remote(0)
        ray.get_actor(name, namespace="other")
        return lambda: None

    plain = outcome(lambda: body(ray.remote(Counter), "ns-counter"))
    with local_mode():
        local = outcome(lambda: body(debuggable(ray.remote(Counter)), "ns-counter-local"))
    assert (local[0], local[1]) == (plain[0], plain[1]) == ("submit", "ValueError")


class Callable2:
    def __call__(self, x: int) -> int:
        return x + 1

    def ping(self) -> str:
        return "pong"


def actor_call_dunder(actor_class: Any) -> Callable[[], Any]:
    handle = actor_class.remote()
    ref = handle.__call__.remote(41)
    return lambda: ray.get(ref)


def actor_terminate_then_call(actor_class: Any) -> Callable[[], Any]:
    handle = actor_class.remote()
    assert ray.get(handle.ping.remote()) == "pong"
    ray.get(handle.__ray_terminate__.remote())
    return lambda: ray.get(handle.ping.remote(), timeout=30)


@pytest.mark.parametrize(
    "row", [actor_call_dunder, actor_terminate_then_call], ids=lambda r: r.__name__
)
def test_ray_methods_on_local_handles(row: Callable[[Any], Any]) -> None:
    """__call__ and __ray_terminate__ work on local handles as on Ray's."""
    plain = outcome(lambda: row(ray.remote(Callable2)))
    with local_mode():
        local = outcome(lambda: row(debuggable(ray.remote(Callable2))))
    assert local[:2] == plain[:2]


@pytest.mark.parametrize(
    ("refs", "num_returns"),
    [pytest.param("dup", 1, id="duplicates"), pytest.param("two", 3, id="too many")],
)
def test_wait_rejects_as_ray_does(refs: str, num_returns: int) -> None:
    """ray.wait with duplicate refs or too large num_returns: Ray's ValueError, in both."""

    def body(remote: Any) -> Callable[[], Any]:
        ref = remote.remote(1, 2)
        waitables = [ref, ref] if refs == "dup" else [ref, remote.remote(3, 4)]
        ray.wait(waitables, num_returns=num_returns)
        return lambda: None

    plain = outcome(lambda: body(ray.remote(add)))
    with local_mode():
        local = outcome(lambda: body(debuggable(ray.remote(add))))
    assert local == plain


def flaky(counter: str, failures: int, error: str) -> int:
    """Fails ``failures`` times (counted in a file, as attempts may run anywhere), then works."""
    path = Path(counter)
    seen = int(path.read_text()) if path.exists() else 0
    path.write_text(str(seen + 1))
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


@pytest.mark.parametrize(("options", "failures", "error"), RETRY_ROWS)
def test_retries_as_ray(tmp_path: Path, options: dict[str, Any], failures: int, error: str) -> None:
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
    assert [e["attempt"] for e in events_of(flaky, "call.end")] == list(range(attempts))


def read_var() -> str | None:
    return os.environ.get("RK_LOCAL_TEST_VAR")


def test_runtime_env_vars_visible_inside_the_call() -> None:
    """runtime_env env_vars are set for the call, and only for it."""
    options = {"runtime_env": {"env_vars": {"RK_LOCAL_TEST_VAR": "on"}}}
    plain = ray.get(ray.remote(read_var).options(**options).remote())
    with local_mode():
        local = ray.get(debuggable(ray.remote(read_var)).options(**options).remote())
    assert local == plain == "on"
    assert "RK_LOCAL_TEST_VAR" not in os.environ
