"""Unit tier: what the boundary imports on demand never breaks a call that cannot import it.

A module made unimportable here, two ways (an ``ImportError``, and an import that raises
something else): the call returns its own result or raises its own exception, with one
warning and one ``instrumentation.error`` for the process.
"""

from __future__ import annotations

import importlib.abc
import pstats
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import ray
from ray.exceptions import RayTaskError

import raytrace_kit
from raytrace_kit import NotSerializableError, RaytraceKitWarning, debuggable
from raytrace_kit._options import CallSpec, DebugOptions, qualified_name
from raytrace_kit._output import frames
from raytrace_kit._worker import boundary, on_demand
from tests import helpers


class _Raising(importlib.abc.MetaPathFinder):
    """A finder that fails the import of one module with ``error``."""

    def __init__(self, module: str, error: Exception) -> None:
        self.module, self.error = module, error

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> None:
        if fullname == self.module:
            raise self.error


Breaker = Callable[[str], None]


@pytest.fixture(params=["ImportError", "RuntimeError"])
def broken(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Breaker:
    """Make a module of the kit fail to import (as a broken install would), until the test ends."""

    def breaking(module: str) -> None:
        package, _, name = module.rpartition(".")
        monkeypatch.delattr(sys.modules[package], name, raising=False)
        if request.param == "ImportError":
            monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
        else:
            monkeypatch.delitem(sys.modules, module, raising=False)
            finder = _Raising(module, RuntimeError("a module that fails as it loads"))
            monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])

    return breaking


def _square(x: int) -> int:
    return x * x


def _fails(x: int) -> int:
    raise KeyError(x)


def _raised(remote: Any, x: int) -> RayTaskError:
    """The exception ``ray.get`` raises for ``remote(x)``: Ray's, of the user's type too."""
    try:
        ray.get(remote.remote(x))
    except RayTaskError as error:
        return error
    msg = "the call did not raise"
    raise AssertionError(msg)


def _returns_a_lock(x: int) -> Any:
    import threading  # noqa: PLC0415 -- the value Ray could not send back

    return threading.Lock()


class TestAModuleThatCannotBeImported:
    """One warning and one event for the process; the user's call goes on as it would."""

    def test_the_profiler(self, broken: Breaker, capsys: pytest.CaptureFixture[str]) -> None:
        """The call runs unprofiled and returns its result, the next one too, warned once."""
        broken("raytrace_kit._worker.profilers")
        square = debuggable(profile="cprofile")(ray.remote(_square))
        with (
            raytrace_kit.local_mode(),
            pytest.warns(RaytraceKitWarning, match="cannot import the call's profile") as warned,
        ):
            results = [ray.get(square.remote(n)) for n in (7, 8)]
        assert results == [49, 64]
        assert len(warned) == 1
        assert capsys.readouterr().err.count("instrumentation.error") == 1
        ends = helpers.events_of(_square, "call.end")
        assert [end["status"] for end in ends] == ["ok", "ok"]
        assert not [end for end in ends if "profile_path" in end]

    def test_a_failed_call_s_capture(
        self, broken: Breaker, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The user's own exception reaches the caller, as it was raised."""
        broken("raytrace_kit._worker.capture")
        fails = debuggable(capture="failures")(ray.remote(_fails))
        with (
            raytrace_kit.local_mode(),
            pytest.warns(RaytraceKitWarning, match="a failed call's locals") as warned,
        ):
            raised = [_raised(fails, n) for n in (3, 4)]
        assert [(error.cause.args, isinstance(error, KeyError)) for error in raised] == [
            ((3,), True),
            ((4,), True),
        ]
        assert len(warned) == 1
        assert capsys.readouterr().err.count("instrumentation.error") == 1
        assert [end["status"] for end in helpers.events_of(_fails, "call.end")] == ["error"] * 2

    def test_the_return_value_s_check(self, broken: Breaker) -> None:
        """check="always" cannot check the value: it is returned, as without the check."""
        broken("raytrace_kit._serialization.walk")
        spec = CallSpec(qualified_name(_returns_a_lock), "task", DebugOptions(check="always"))
        with pytest.warns(RaytraceKitWarning, match="the check of return values") as warned:
            value = boundary.run(spec, _returns_a_lock, (1,), {}, mode="local")
        assert type(value).__name__ == "lock"
        assert len(warned) == 1

    def test_the_sampler(self, broken: Breaker) -> None:
        """sample= cannot start its thread: the call returns its result."""
        broken("raytrace_kit._worker.sampler")
        square = debuggable(sample=50)(ray.remote(_square))
        with (
            raytrace_kit.local_mode(),
            pytest.warns(RaytraceKitWarning, match="the sampling profiler") as warned,
        ):
            assert ray.get(square.remote(5)) == 25
        assert len(warned) == 1


class TestItsFramesAreTheKits:
    """Frames of on_demand are the kit's call path: out of tracebacks and profiles."""

    def test_on_the_call_path(self) -> None:
        assert on_demand.__file__ is not None
        assert frames.on_call_path(on_demand.__file__)

    def test_not_in_a_profile(self) -> None:
        """A cProfile of a call has rows of the user's code, none of on_demand."""
        square = debuggable(profile="cprofile")(ray.remote(_square))
        with raytrace_kit.local_mode():
            assert ray.get(square.remote(4)) == 16
        (end,) = helpers.events_of(_square, "call.end")
        table: dict[tuple[str, int, str], Any] = pstats.Stats(end["profile_path"]).stats  # type: ignore[attr-defined]
        assert [key for key in table if key[2] == "_square"]
        assert not [key for key in table if key[0] == on_demand.__file__]


class TestWhatItImportsWorks:
    """Imported on demand, each part does what it did imported at the top."""

    def test_the_return_value_s_check_still_fails_the_call(self) -> None:
        spec = CallSpec(qualified_name(_returns_a_lock), "task", DebugOptions(check="always"))
        with pytest.raises(NotSerializableError, match="returning from the call"):
            boundary.run(spec, _returns_a_lock, (1,), {}, mode="local")
