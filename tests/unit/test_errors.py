"""Unit tier: each misuse raises a RaytraceKitError that is also the expected built-in.

The message names the fix. No Ray needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import raytrace_kit
from raytrace_kit import (
    InvalidTargetError,
    InvalidValueError,
    ProfileError,
    ProfileNotFoundError,
    RaytraceKitError,
    UsageError,
    debuggable,
)


def double(x: int) -> int:
    return 2 * x


class Holder:
    pass


def _direct_function_call() -> None:
    debuggable(double)(1)


def _direct_class_call() -> None:
    debuggable(Holder)()


MISUSES: list[tuple[str, Callable[[Path], Any], type[Exception], type[Exception], str]] = [
    # name, the misuse, kit error, built-in, words of the fix
    (
        "profile_memory(bogus=1)",
        lambda _: raytrace_kit.profile_memory(bogus=1),
        InvalidValueError,
        ValueError,
        "valid ones are: file_format",
    ),
    (
        "profile_cpu(native_traces=True)",
        lambda _: raytrace_kit.profile_cpu(native_traces=True),
        InvalidValueError,
        ValueError,
        "valid ones are: builtins, subcalls, timeunit",
    ),
    (
        "attach_debugger('gdb')",
        lambda _: raytrace_kit.attach_debugger("gdb"),  # type: ignore[arg-type]
        InvalidValueError,
        ValueError,
        "use 'debugpy' or 'pycharm'",
    ),
    (
        "set_local_mode('yes')",
        lambda _: raytrace_kit.set_local_mode("yes"),  # type: ignore[arg-type]
        UsageError,
        TypeError,
        "set_local_mode(True) turns local mode on",
    ),
    (
        "stacks(object())",
        lambda _: raytrace_kit.stacks(object()),
        InvalidTargetError,
        TypeError,
        "needs the handle of an actor of a @debuggable class",
    ),
    (
        "flamegraph(missing)",
        lambda tmp: raytrace_kit.flamegraph(tmp / "missing.bin"),
        ProfileNotFoundError,
        FileNotFoundError,
        "pass a call's profile_path",
    ),
    (
        "flamegraph(not a capture)",
        lambda tmp: raytrace_kit.flamegraph(_write(tmp / "notes.bin", "hello")),
        ProfileError,
        RuntimeError,
        "memray could not render",
    ),
    (
        "profile_summary(missing)",
        lambda tmp: raytrace_kit.profile_summary(tmp / "gone.prof"),
        ProfileNotFoundError,
        FileNotFoundError,
        "no profile file at",
    ),
    (
        "cpu_stats(empty dir)",
        raytrace_kit.cpu_stats,
        ProfileNotFoundError,
        FileNotFoundError,
        "no .prof files",
    ),
    (
        "calling a debuggable function directly",
        lambda _: _direct_function_call(),
        UsageError,
        TypeError,
        "use double.remote(...)",
    ),
    (
        "instantiating a debuggable class directly",
        lambda _: _direct_class_call(),
        UsageError,
        TypeError,
        "use Holder.remote(...)",
    ),
    (
        "stacks(the class)",
        lambda _: raytrace_kit.stacks(debuggable(Holder)),
        InvalidTargetError,
        TypeError,
        "takes an actor handle, not the actor class",
    ),
    (
        "profile_summary(not a profile)",
        lambda tmp: raytrace_kit.profile_summary(_write(tmp / "notes.bin", "hello")),
        ProfileError,
        RuntimeError,
        "is not a memray capture or a cProfile .prof file",
    ),
    (
        "profile_summary(a .prof that is not)",
        lambda tmp: raytrace_kit.profile_summary(_write(tmp / "notes.prof", "hello")),
        ProfileError,
        RuntimeError,
        "is not a cProfile file",
    ),
    (
        "local_mode(enabled='no')",
        lambda _: raytrace_kit.local_mode(enabled="no").__enter__(),  # type: ignore[arg-type]
        UsageError,
        TypeError,
        "local_mode(True) turns local mode on",
    ),
    (
        "Pin(process=False) without a node",
        lambda _: raytrace_kit.Pin(process=False),
        raytrace_kit.InvalidOptionError,
        TypeError,
        "pins nothing: give node_id=",
    ),
    (
        "read_events(missing)",
        lambda tmp: raytrace_kit.read_events(tmp / "nowhere"),
        raytrace_kit.EventsNotFoundError,
        FileNotFoundError,
        "no such file or directory. Pass an event file",
    ),
    (
        "profile_memory(path=existing)",
        lambda tmp: raytrace_kit.profile_memory(_write(tmp / "old.bin", "")),
        InvalidValueError,
        ValueError,
        "memray never overwrites a capture. Pass a new path",
    ),
    (
        "attach_debugger(port='abc')",
        lambda _: raytrace_kit.attach_debugger(port="abc"),  # type: ignore[arg-type]
        InvalidValueError,
        ValueError,
        "a port is a whole number from 0 to 65535",
    ),
    (
        "@debuggable on an int",
        lambda _: debuggable(3),
        InvalidTargetError,
        TypeError,
        "apply @debuggable to a function or class definition",
    ),
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("misuse", "kit_error", "builtin", "words"),
    [pytest.param(m, k, b, w, id=name) for name, m, k, b, w in MISUSES],
)
def test_misuse_raises_a_kit_error(
    tmp_path: Path,
    misuse: Callable[[Path], Any],
    kit_error: type[Exception],
    builtin: type[Exception],
    words: str,
) -> None:
    """The kit's own error class, the built-in one, and the fix in the message."""
    with pytest.raises(kit_error) as info:
        misuse(tmp_path)
    assert isinstance(info.value, RaytraceKitError)
    assert isinstance(info.value, builtin)
    assert words in str(info.value)


def test_every_public_exception_derives_from_the_root() -> None:
    """Every exception class raytrace_kit exports is a RaytraceKitError."""
    exported = [
        getattr(raytrace_kit, name)
        for name in raytrace_kit.__all__
        if isinstance(getattr(raytrace_kit, name), type)
        and issubclass(getattr(raytrace_kit, name), BaseException)
        and not issubclass(getattr(raytrace_kit, name), Warning)
    ]
    assert len(exported) >= 9
    assert all(issubclass(cls, RaytraceKitError) for cls in exported)
