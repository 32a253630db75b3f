"""Tests for debuggable(): the forms it accepts and the errors it raises."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import (
    DebuggableActorClass,
    DebuggableFunction,
    InvalidOptionError,
    InvalidTargetError,
    debuggable,
)
from tests.helpers import events_of


def double(x: int, factor: int = 2) -> int:
    """Multiply by two."""
    return x * factor


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def increment(self) -> int:
        self.count += 1
        return self.count

    def read(self) -> int:
        return self.count


# dir() of what plain Ray gives and of its debuggable counterpart: (object, the kit's own
# public names, names a user completes). An actor's handle is Ray's own, with or without.
DIR_ROWS = [
    pytest.param(
        lambda wrap: wrap(ray.remote(Counter)),
        {"with_debug", "debug_options"},
        {"remote", "options", "increment", "read"},
        id="actor class",
    ),
    pytest.param(
        lambda wrap: wrap(ray.remote(double)),
        {"with_debug", "debug_options", "pinned_worker", "stacks", "unpin"},
        {"remote", "options", "bind"},
        id="remote function",
    ),
    pytest.param(
        lambda wrap: wrap(ray.remote(Counter)).remote(),
        set(),
        {"increment", "read"},
        id="actor handle",
    ),
]


@pytest.mark.compat
class TestForms:
    """Every way of decorating gives a working, instrumented object."""

    @pytest.mark.usefixtures("ray_session")
    def test_bare_over_ray_remote(self) -> None:
        """@debuggable over @ray.remote runs the task and logs it."""
        f = debuggable(ray.remote(double))
        assert isinstance(f, DebuggableFunction)
        assert ray.get(f.remote(21)) == 42
        assert [e["event"] for e in events_of(double)] == ["call.start", "call.end"]

    @pytest.mark.usefixtures("ray_session")
    def test_with_keywords_over_ray_remote_with_options(self) -> None:
        """@debuggable(log=...) over @ray.remote(num_returns=2) keeps Ray's options."""

        @debuggable(log=True)
        @ray.remote(num_returns=2)
        def pair() -> tuple[int, int]:
            return 1, 2

        refs = pair.remote()
        assert isinstance(refs, list)
        assert ray.get(refs) == [1, 2]
        assert len(events_of(pair, "call.end")) == 1

    @pytest.mark.usefixtures("ray_session")
    def test_plain_function_gets_ray_remote_applied(self) -> None:
        """A plain function is made remote by debuggable itself."""

        @debuggable
        def plain(x: int) -> int:
            return x + 1

        assert ray.get(plain.remote(1)) == 2
        assert len(events_of(plain, "call.end")) == 1

    @pytest.mark.usefixtures("ray_session")
    def test_plain_class_becomes_actor_class(self) -> None:
        """A plain class is made an actor class by debuggable itself."""

        @debuggable
        class Box:
            def __init__(self, value: int) -> None:
                self.value = value

            def get(self) -> int:
                return self.value

        assert isinstance(Box, DebuggableActorClass)
        box = Box.remote(7)
        assert isinstance(box, ray.actor.ActorHandle)
        assert ray.get(box.get.remote()) == 7
        kinds = [e["kind"] for e in events_of(Box, "call.end")]
        assert kinds == ["actor_init", "actor_method"]

    @pytest.mark.usefixtures("ray_session")
    def test_decorating_twice_applies_the_outer_options(self) -> None:
        """debuggable(log=False) over a debuggable turns logging off, keeps the code."""

        @debuggable(log=False)
        @debuggable
        @ray.remote
        def twice() -> int:
            return 3

        assert twice.debug_options.log is False
        assert ray.get(twice.remote()) == 3
        assert events_of(twice) == []


class TestIdentity:
    """The proxy looks like the user's function: name, docs, signature, wrapped object."""

    def test_function_metadata_survives(self) -> None:
        """__name__, __qualname__, __module__, __doc__, __wrapped__ and signature."""
        remote = ray.remote(double)
        f = debuggable(remote)
        assert f.__name__ == "double"
        assert f.__qualname__ == "double"
        assert f.__module__ == __name__
        assert f.__doc__ == "Multiply by two."
        assert f.__wrapped__ is remote
        assert inspect.signature(f) == inspect.signature(double)

    def test_other_attributes_fall_through_to_the_remote_function(self) -> None:
        """Attributes the proxy does not define come from the wrapped RemoteFunction."""
        remote = ray.remote(num_cpus=0.5)(double)
        f = debuggable(remote)
        assert f._default_options == remote._default_options

    def test_actor_class_metadata_survives(self) -> None:
        """An actor class keeps its name, docs and wrapped ActorClass."""

        class Store:
            """Holds things."""

        actor_class = ray.remote(Store)
        wrapped = debuggable(actor_class)
        assert wrapped.__name__ == "Store"
        assert wrapped.__doc__ == "Holds things."
        assert wrapped.__wrapped__ is actor_class

    @pytest.mark.usefixtures("ray_session")
    @pytest.mark.parametrize(("make", "kit_names", "completed"), DIR_ROWS)
    def test_dir_is_plain_rays_and_the_kits_names(
        self, make: Callable[[Callable[[Any], Any]], Any], kit_names: set[str], completed: set[str]
    ) -> None:
        """dir() (tab completion) lists what plain Ray's lists, and the kit's public names."""
        plain, kit = make(lambda remote: remote), make(debuggable)
        assert set(dir(kit)) == set(dir(plain)) | kit_names
        assert completed <= set(dir(kit))

    def test_calling_directly_names_the_fix(self) -> None:
        """Calling a debuggable function directly says to use .remote()."""
        f = debuggable(ray.remote(double))
        with pytest.raises(TypeError, match=r"double\.remote\("):
            f(1)


class TestMisuse:
    """Bad input fails at decoration time, with the problem and the fix."""

    @pytest.mark.parametrize(
        ("target", "fix"),
        [
            (42, "function or class definition"),
            ("transform", "function or class definition"),
            (len, "wrap this callable in a plain 'def'"),
        ],
    )
    def test_not_a_function_or_class(self, target: object, fix: str) -> None:
        """Non-function targets raise InvalidTargetError naming the fix."""
        with pytest.raises(InvalidTargetError, match=fix) as info:
            debuggable(target)
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, raytrace_kit.RaytraceKitError)

    def test_async_function(self) -> None:
        """An async def function cannot be a task; the error says what to do."""

        async def fetch() -> None:
            pass

        with pytest.raises(InvalidTargetError, match=r"asyncio\.run"):
            debuggable(fetch)

    def test_ray_options_wrapper(self) -> None:
        """f.options(...) is not a remote function: the error shows the right order."""
        with pytest.raises(InvalidTargetError, match=r"debuggable\(f\)\.options"):
            debuggable(ray.remote(double).options(num_cpus=1))

    @pytest.mark.usefixtures("ray_session")
    def test_actor_handle(self) -> None:
        """Decorating an actor handle points at the actor class instead."""

        @ray.remote
        class Plain:
            pass

        handle = Plain.remote()
        with pytest.raises(InvalidTargetError, match="decorate the actor class"):
            debuggable(handle)
        ray.kill(handle)

    def test_unknown_option_lists_the_valid_ones(self) -> None:
        """An unknown keyword names itself and lists valid options."""
        valid = (
            r"valid options are: capture, check, local, log, log_args, pin, post_mortem, profile, "
            r"profile_options, profile_scope"
        )
        with pytest.raises(InvalidOptionError, match=rf"'num_cpus'.*{valid}"):
            debuggable(num_cpus=1)

    def test_option_of_wrong_type(self) -> None:
        """A wrong type names the option, the value and the expected type."""
        with pytest.raises(InvalidOptionError, match=r"log='yes'.*expected a bool") as info:
            debuggable(log="yes")
        assert info.value.option == "log"
