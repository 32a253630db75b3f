"""A local call's arguments (``_local.arguments``), prepared as Ray prepares them, without Ray.

Ray checks a call's arguments against the signature and serializes them at ``.remote()``:
the caller's later mutations never reach the call, an unserializable argument fails
there, and refs passed as top-level arguments arrive as their values.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ray.exceptions import RayTaskError

from raytrace_kit._local import arguments
from raytrace_kit._local.refs import LocalRef, error_ref, value_ref
from raytrace_kit._local.setting import LocalConfig

COPY = LocalConfig()
SHARE = LocalConfig(copy=False)


def two(a: int, b: int = 2) -> int:
    return a + b


def star(*values: int) -> int:
    return sum(values)


def keyword_only(a: int, *, b: int) -> int:
    return a + b


def items(n: int) -> Iterator[int]:
    yield from range(n)


async def async_items(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


async def coroutine() -> int:
    return 1


class TestArity:
    """``arity``: the positional counts a signature takes, when no binding is needed."""

    @pytest.mark.parametrize(
        ("function", "expected"),
        [
            pytest.param(two, (1, 2), id="a default"),
            pytest.param(coroutine, (0, 0), id="no parameters"),
            pytest.param(lambda a, b, /, c: None, (3, 3), id="positional-only"),
            pytest.param(star, None, id="*args"),
            pytest.param(keyword_only, None, id="keyword-only"),
            pytest.param(lambda **kwargs: None, None, id="**kwargs"),
        ],
    )
    def test_fewest_and_most(self, function: Callable[..., Any], expected: object) -> None:
        """(required, all) for plain parameters; None when inspect must bind the call."""
        assert arguments.arity(inspect.signature(function)) == expected


class TestCheckCall:
    """``check_call``: arguments that do not fit raise Ray's ``TypeError`` at ``.remote()``."""

    @pytest.mark.parametrize(
        ("args", "kwargs", "message"),
        [
            pytest.param((1, 2, 3), {}, "too many positional arguments", id="too many"),
            pytest.param((), {}, "missing a required argument: 'a'", id="missing"),
            pytest.param(
                (1,), {"c": 3}, "got an unexpected keyword argument 'c'", id="unknown keyword"
            ),
            pytest.param((1,), {"a": 1}, "multiple values for argument 'a'", id="twice"),
        ],
    )
    def test_inspects_message_which_is_rays(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
    ) -> None:
        """The message is inspect's (Ray binds the signature the same way), nothing added."""
        signature = inspect.signature(two)
        with pytest.raises(TypeError) as raised:
            arguments.check_call(signature, args, kwargs, arguments.arity(signature))
        assert str(raised.value) == message
        with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
            signature.bind(*args, **kwargs)

    def test_the_error_does_not_chain_inspects(self) -> None:
        """The user sees one TypeError, not inspect's internals as its cause."""
        with pytest.raises(TypeError) as raised:
            arguments.check_call(inspect.signature(two), (), {})
        assert raised.value.__cause__ is None
        assert raised.value.__suppress_context__

    @pytest.mark.parametrize(
        ("function", "args", "kwargs"),
        [
            pytest.param(two, (1,), {}, id="positional"),
            pytest.param(two, (1,), {"b": 3}, id="keyword"),
            pytest.param(star, (1, 2, 3, 4), {}, id="*args"),
            pytest.param(keyword_only, (1,), {"b": 2}, id="keyword-only"),
        ],
    )
    def test_arguments_that_fit_pass(
        self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A call that fits is accepted, with or without the arity shortcut."""
        signature = inspect.signature(function)
        arguments.check_call(signature, args, kwargs)
        arguments.check_call(signature, args, kwargs, arguments.arity(signature))

    @given(
        required=st.integers(0, 4),
        optional=st.integers(0, 4),
        given_count=st.integers(0, 10),
    )
    def test_the_shortcut_agrees_with_binding(
        self, required: int, optional: int, given_count: int
    ) -> None:
        """For any plain signature and positional count, accepted exactly when bind accepts."""
        parameters = [
            inspect.Parameter(f"p{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for i in range(required)
        ] + [
            inspect.Parameter(f"o{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=i)
            for i in range(optional)
        ]
        signature = inspect.Signature(parameters)
        args = tuple(range(given_count))
        try:
            signature.bind(*args)
        except TypeError as error:
            with pytest.raises(TypeError, match=f"^{re.escape(str(error))}$"):
                arguments.check_call(signature, args, {}, arguments.arity(signature))
        else:
            arguments.check_call(signature, args, {}, arguments.arity(signature))


class TestCopyArguments:
    """``copy_arguments``: copies as Ray's serializer makes them at ``.remote()``."""

    def test_a_mutable_argument_is_copied(self) -> None:
        """A list reaches the call as an equal copy: mutations on either side stay there."""
        items_ = [1, 2]
        (copied,), kwargs = arguments.copy_arguments((items_,), {"more": {"k": [3]}}, "m.f")
        assert copied == items_
        assert copied is not items_
        assert kwargs == {"more": {"k": [3]}}

    @pytest.mark.parametrize(
        "value", [1, 2.5, "text", b"bytes", None, True, (1, "a", None)], ids=repr
    )
    def test_immutable_arguments_are_passed_as_they_are(self, value: object) -> None:
        """Nothing a copy would protect: the very objects are passed."""
        args, kwargs = (value,), {"same": value}
        assert arguments.copy_arguments(args, kwargs, "m.f") == (args, kwargs)
        assert arguments.copy_arguments(args, kwargs, "m.f")[0][0] is value

    def test_an_unserializable_argument_is_rays_type_error(self) -> None:
        """A lock fails with Ray's words: the argument, "for a task or actor", the function."""
        lock = threading.Lock()
        with pytest.raises(TypeError) as raised:
            arguments.copy_arguments((1, lock), {}, "jobs.compute")
        message = str(raised.value)
        assert message.startswith(
            f"Could not serialize the argument {lock!r} for a task or actor jobs.compute"
        )
        assert "cannot pickle '_thread.lock' object" in message
        assert isinstance(raised.value.__cause__, TypeError)

    def test_an_unserializable_keyword_argument_is_named_too(self) -> None:
        """The culprit is found among keyword arguments as well."""
        lock = threading.Lock()
        with pytest.raises(TypeError, match="Could not serialize the argument <unlocked"):
            arguments.copy_arguments((), {"guard": lock, "n": [1]}, "jobs.compute")

    def test_refs_stay_refs(self) -> None:
        """A ref inside a container travels as the ref itself, as Ray passes refs."""
        ref = value_ref([1], copy=True, function="m.up")
        ((box,), _) = arguments.copy_arguments(({"ref": ref},), {}, "m.f")
        assert box["ref"] is ref


class TestPrepareArguments:
    """``prepare_arguments``: top-level refs resolved, then copied unless copy is off."""

    def test_copy_on_copies_a_list(self) -> None:
        """With copy on (the default), the call gets an equal list, not the caller's."""
        items_ = [1]
        (got,), _ = arguments.prepare_arguments((items_,), {}, COPY, "m.f")
        assert (got == items_, got is items_) == (True, False)

    def test_copy_off_shares_the_list(self) -> None:
        """With copy=False the caller's object itself is passed: the trade for speed."""
        items_ = [1]
        (got,), _ = arguments.prepare_arguments((items_,), {}, SHARE, "m.f")
        assert got is items_

    @pytest.mark.parametrize("config", [COPY, SHARE], ids=["copy", "share"])
    def test_top_level_refs_become_values_nested_ones_stay(self, config: LocalConfig) -> None:
        """A ref argument arrives as its value; a ref inside a container stays a ref."""
        ref = value_ref(10, copy=True, function="m.up")
        args, kwargs = arguments.prepare_arguments((ref, [ref]), {"k": ref}, config, "m.f")
        assert args[0] == 10
        assert kwargs == {"k": 10}
        assert isinstance(args[1][0], LocalRef)
        assert args[1][0] is ref

    def test_a_failed_dependency_fails_the_call(self) -> None:
        """The ref of a failed call raises its error, a RayTaskError that is also the cause."""
        failed = error_ref(KeyError("upstream"), "m.up")
        with pytest.raises(RayTaskError) as raised:
            arguments.prepare_arguments((failed,), {}, COPY, "m.f")
        assert isinstance(raised.value, KeyError)
        assert "upstream" in str(raised.value)

    def test_an_unserializable_argument_fails_only_when_copying(self) -> None:
        """copy=False passes a lock on; copy on fails at once, with Ray's TypeError."""
        lock = threading.Lock()
        assert arguments.prepare_arguments((lock,), {}, SHARE, "m.f")[0][0] is lock
        with pytest.raises(TypeError, match=r"for a task or actor m\.f"):
            arguments.prepare_arguments((lock,), {}, COPY, "m.f")


class TestIsGenerator:
    """``is_generator``: which calls give an ``ObjectRefGenerator``."""

    @pytest.mark.parametrize(
        ("function", "expected"),
        [
            pytest.param(items, True, id="generator"),
            pytest.param(async_items, True, id="async generator"),
            pytest.param(two, False, id="function"),
            pytest.param(coroutine, False, id="coroutine"),
        ],
    )
    def test_generators_and_async_generators(
        self, function: Callable[..., Any], expected: bool
    ) -> None:
        """Generator and async generator functions are; plain and async functions are not."""
        assert arguments.is_generator(function) is expected
