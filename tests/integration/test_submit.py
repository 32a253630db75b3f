"""Tests for the driver side: .remote(), .options(), .with_debug(), pickling, nesting."""

from __future__ import annotations

import pickle

import pytest
import ray
import ray.cloudpickle

from raytrace_kit import (
    DebuggableFunction,
    DebugOptions,
    InvalidOptionError,
    debuggable,
)
from tests.helpers import events_of

pytestmark = pytest.mark.usefixtures("ray_session")


@debuggable
@ray.remote
def square(x: int) -> int:
    return x * x


@debuggable
@ray.remote
class Accumulator:
    def __init__(self, start: int = 0) -> None:
        self.total = start

    def add(self, x: int) -> int:
        self.total += x
        return self.total


class TestRemote:
    """.remote() returns exactly what Ray returns."""

    def test_object_ref(self) -> None:
        """A plain task gives one ObjectRef."""
        ref = square.remote(3)
        assert isinstance(ref, ray.ObjectRef)
        assert ray.get(ref) == 9

    def test_streaming_generator(self) -> None:
        """A generator function gives Ray's ObjectRefGenerator, one ref per item."""

        @debuggable
        @ray.remote
        def count(n: int):
            # Not `yield from range(n)`: Ray sends into task generators, which plain
            # iterators do not accept (with or without raytrace_kit).
            for i in range(n):  # noqa: UP028 -- see above
                yield i

        gen = count.remote(3)
        assert isinstance(gen, ray.ObjectRefGenerator)
        assert [ray.get(ref) for ref in gen] == [0, 1, 2]
        (end,) = events_of(count, "call.end")
        assert end["status"] == "ok"

    def test_argument_errors_surface_at_submission(self) -> None:
        """Ray still checks arguments against the user's signature before submitting."""
        with pytest.raises(TypeError, match="too many positional arguments"):
            square.remote(1, 2)

    def test_object_refs_as_arguments(self) -> None:
        """ObjectRefs passed as arguments are resolved, as in Ray."""
        assert ray.get(square.remote(square.remote(2))) == 16


class TestOptions:
    """.options() and .with_debug() return debuggables; the original is unchanged."""

    def test_options_returns_a_debuggable_with_ray_options(self) -> None:
        """Ray options apply, and calls through the copy are still instrumented."""
        pair = square.options(num_returns=1, name="custom-name")
        assert isinstance(pair, DebuggableFunction)
        assert ray.get(pair.remote(4)) == 16
        assert len(events_of(square, "call.end")) == 1

    def test_options_chain_merges(self) -> None:
        """Options given in two steps both apply."""

        @debuggable
        @ray.remote
        def three() -> tuple[int, int, int]:
            return 1, 2, 3

        refs = three.options(num_cpus=0.5).options(num_returns=3).remote()
        assert ray.get(refs) == [1, 2, 3]

    def test_bad_ray_option_fails_at_options(self) -> None:
        """Ray's own validation runs when .options() is called."""
        with pytest.raises(ValueError, match="num_cpus"):
            square.options(num_cpus=-1)

    def test_with_debug_log_false_writes_no_call_events(self) -> None:
        """with_debug(log=False) turns call events off for that copy only."""

        @debuggable
        @ray.remote
        def quiet(x: int) -> int:
            return x

        assert ray.get(quiet.with_debug(log=False).remote(1)) == 1
        assert events_of(quiet) == []
        assert ray.get(quiet.remote(2)) == 2
        assert len(events_of(quiet, "call.end")) == 1
        assert quiet.debug_options == DebugOptions(log=True)

    def test_with_debug_validates(self) -> None:
        """Unknown kit options are rejected with the list of valid ones."""
        with pytest.raises(InvalidOptionError, match="valid options are"):
            square.with_debug(profil="memray")

    def test_actor_class_options_and_with_debug(self) -> None:
        """An actor class accepts Ray options and kit options the same way."""
        quiet = Accumulator.options(num_cpus=0).with_debug(log=False).remote(5)
        assert ray.get(quiet.add.remote(1)) == 6
        loud = Accumulator.options(num_cpus=0).remote(5)
        assert ray.get(loud.add.remote(2)) == 7
        ends = events_of(Accumulator, "call.end")
        assert [e["kind"] for e in ends] == ["actor_init", "actor_method"]
        ray.kill(quiet)
        ray.kill(loud)


class TestPickling:
    """A debuggable survives Ray's pickling: captured in closures, passed as arguments."""

    def test_round_trip_keeps_options(self) -> None:
        """Pickled as Ray pickles it (cloudpickle), a debuggable keeps its options."""
        original = square.options(num_cpus=0.5).with_debug(log=False)
        loaded = pickle.loads(ray.cloudpickle.dumps(original))
        assert isinstance(loaded, DebuggableFunction)
        assert loaded.debug_options == DebugOptions(log=False)
        assert loaded.__name__ == "square"
        assert ray.get(loaded.remote(5)) == 25

    def test_captured_in_a_plain_task_closure(self) -> None:
        """A plain Ray task that calls a debuggable: the nested call is instrumented."""

        @ray.remote
        def outer(x: int) -> int:
            return ray.get(square.remote(x)) + 1

        assert ray.get(outer.remote(3)) == 10
        (end,) = events_of(square, "call.end")
        assert end["status"] == "ok"

    def test_passed_as_an_argument(self) -> None:
        """A debuggable passed as an argument keeps working in the worker."""

        @ray.remote
        def apply(fn: DebuggableFunction, x: int) -> int:
            return ray.get(fn.remote(x))

        assert ray.get(apply.remote(square, 6)) == 36
        assert len(events_of(square, "call.end")) == 1

    def test_called_from_an_instrumented_actor(self) -> None:
        """An actor method of a debuggable class calls a debuggable function."""

        @debuggable
        @ray.remote
        class Caller:
            def call(self, x: int) -> int:
                return ray.get(square.remote(x))

        caller = Caller.remote()
        assert ray.get(caller.call.remote(7)) == 49
        assert len(events_of(square, "call.end")) == 1
        assert len(events_of(Caller, "call.end")) == 2
        ray.kill(caller)


class TestPostMortemOnCluster:
    """post_mortem=True turns on Ray's post-mortem debugger for that function only."""

    def test_env_reaches_only_that_functions_workers(self) -> None:
        """RAY_DEBUG_POST_MORTEM is set in its workers, merged with the user's env_vars."""

        @ray.remote
        def read_env() -> tuple[str | None, str | None]:
            import os  # noqa: PLC0415 -- runs in the worker

            return os.environ.get("RAY_DEBUG_POST_MORTEM"), os.environ.get("USER_SETTING")

        env = {"env_vars": {"USER_SETTING": "kept"}}
        debugged = debuggable(post_mortem=True)(read_env).options(runtime_env=env)
        assert ray.get(debugged.remote()) == ("1", "kept")
        assert ray.get(read_env.remote()) == (None, None)
        assert ray.get(debuggable(read_env).remote()) == (None, None)
