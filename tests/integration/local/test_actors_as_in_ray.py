"""Actors in local mode against plain Ray: constructors, methods, names, Ray's own methods.

Each test runs one body twice, with plain Ray (the shared cluster) and in local mode, and
compares what the program sees: a value, or the exception's type and message, and whether
it came at ``.remote()`` or at ``ray.get``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import ray

from raytrace_kit import debuggable, local_mode
from tests import helpers
from tests.helpers import events_of, outcome

pytestmark = pytest.mark.usefixtures("ray_session")


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    def bump(self, by: int = 1) -> int:
        self.value += by
        return self.value

    @staticmethod
    def twice(x: int) -> int:
        return 2 * x


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


ACTOR_ROWS = [
    actor_bad_constructor,
    actor_bad_method_call,
    actor_static_method_bad_call,
    actor_good_calls,
]


@pytest.mark.parametrize("row", ACTOR_ROWS, ids=lambda r: r.__name__)
def test_actor_signatures_and_calls(row: Callable[[Any], Any]) -> None:
    """Constructors, methods and static methods: same values, same errors, same place."""
    plain = outcome(lambda: row(ray.remote(Counter)))
    with local_mode():
        local = outcome(lambda: row(debuggable(ray.remote(Counter))))
    assert local == plain


@pytest.mark.compat
def test_duplicate_actor_name() -> None:
    """A taken name is Ray's error, with Ray's message, in both.

    ``ActorAlreadyExistsError`` (a ``ValueError``) from Ray 2.53; a plain ``ValueError``
    before.
    """
    new = hasattr(ray.exceptions, "ActorAlreadyExistsError")
    error = "ActorAlreadyExistsError" if new else "ValueError"

    def body(actor_class: Any, name: str) -> Callable[[], Any]:
        first = actor_class.options(name=name).remote(0)
        actor_class.options(name=name).remote(0)
        return lambda: first

    plain = outcome(lambda: body(ray.remote(Counter), "dup-counter"))
    with local_mode():
        local = outcome(lambda: body(debuggable(ray.remote(Counter)), "dup-counter"))
    assert local[:2] == plain[:2] == ("submit", error)
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


class Leaver:
    """Actors that end themselves with ray.actor.exit_actor(), sync and async."""

    def leave(self) -> None:
        ray.actor.exit_actor()


class AsyncLeaver:
    async def leave(self) -> None:
        ray.actor.exit_actor()


@pytest.mark.parametrize("cls", [Leaver, AsyncLeaver], ids=["sync", "async"])
def test_exit_actor_recorded_as_on_a_cluster(cls: type) -> None:
    """The call that calls exit_actor(): the same caller's error and the same call.end."""

    def leave() -> tuple[Any, ...]:
        handle = debuggable(ray.remote(cls)).remote()
        seen = outcome(lambda: ray.get(handle.leave.remote()))
        (end,) = [e for e in events_of(cls, "call.end") if e["function"].endswith(".leave")]
        return seen, end["status"], end["error_type"]

    on_cluster = leave()
    helpers.open_window()  # the local call's events only
    with local_mode():
        assert leave() == on_cluster
    assert on_cluster[0][1] == "ActorDiedError"
