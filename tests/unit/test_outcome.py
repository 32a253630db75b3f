"""What a local call returns (``_local.outcome``): the refs Ray would give, without Ray.

A local call's refs are ``LocalRef`` objects, real ``ray.ObjectRef`` subclasses that hold
their value in this process; no ``ray.init()`` is needed to make or read them. They are
read here through ``ref.future()``, as any ``ObjectRef`` can be.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
import ray
from ray.exceptions import RayTaskError

from raytrace_kit._local.outcome import Outcome, failed_refs, package
from raytrace_kit._local.refs import task_error

FUNCTION = "jobs.compute"


def returned(value: Any = None, *, items: list[Any] | None = None, error: Any = None) -> Outcome:
    """What a call produced: a value, or a generator's items, and maybe an error."""
    made = Outcome()
    made.value, made.items, made.error = value, items, error
    return made


def value_of(ref: ray.ObjectRef) -> Any:
    """The ref's value (raises its error), read as ``ObjectRef.future()`` gives it."""
    return ref.future().result(timeout=5)


class TestValues:
    """A call's value in as many refs as ``num_returns`` says."""

    @pytest.mark.parametrize("num_returns", [None, 1], ids=["default", "1"])
    def test_one_ref_holds_the_whole_value(self, num_returns: int | None) -> None:
        """One ref (not a list), whose value is what the call returned, tuples included."""
        ref = package(returned((1, 2)), num_returns, copy=True, function=FUNCTION)
        assert isinstance(ref, ray.ObjectRef)
        assert value_of(ref) == (1, 2)

    @pytest.mark.parametrize(
        ("value", "num_returns"),
        [pytest.param((1, 2), 2, id="2"), pytest.param([1, 2, 3], 3, id="3 from a list")],
    )
    def test_n_refs_one_per_item(self, value: Any, num_returns: int) -> None:
        """num_returns=N: a list of N refs, one per item of what the call returned."""
        refs = package(returned(value), num_returns, copy=True, function=FUNCTION)
        assert isinstance(refs, list)
        assert len(refs) == num_returns
        assert [value_of(ref) for ref in refs] == list(value)

    def test_zero_returns_gives_none(self) -> None:
        """num_returns=0: .remote() returns None, as in Ray."""
        assert package(returned(None), 0, copy=True, function=FUNCTION) is None

    @pytest.mark.parametrize(
        ("value", "num_returns", "count"),
        [
            pytest.param((1, 2), 3, 2, id="too few"),
            pytest.param((1, 2, 3), 2, 3, id="too many"),
            pytest.param([], 2, 0, id="none"),
        ],
    )
    def test_a_wrong_count_is_rays_value_error_in_every_ref(
        self, value: Any, num_returns: int, count: int
    ) -> None:
        """Every ref raises Ray's ValueError, "Task returned N objects, but num_returns=M."."""
        refs = package(returned(value), num_returns, copy=True, function=FUNCTION)
        assert len(refs) == num_returns
        message = f"Task returned {count} objects, but num_returns={num_returns}."
        for ref in refs:
            with pytest.raises(ValueError, match=re.escape(message)) as raised:
                value_of(ref)
            assert isinstance(raised.value, RayTaskError)
            assert str(raised.value.cause) == message

    def test_copy_on_gives_a_fresh_copy(self) -> None:
        """With copy on, the caller gets an equal copy, as Ray deserializes one."""
        result = [1, [2]]
        ref = package(returned(result), None, copy=True, function=FUNCTION)
        got = value_of(ref)
        assert got == result
        assert got is not result

    def test_copy_off_gives_the_object_itself(self) -> None:
        """With copy=False the very object comes back."""
        result = [1, [2]]
        ref = package(returned(result), None, copy=False, function=FUNCTION)
        assert value_of(ref) is result


class TestErrors:
    """A call's exception, raised at ``ray.get`` as Ray raises it."""

    @pytest.mark.parametrize("num_returns", [None, 1, 2], ids=["default", "1", "2"])
    def test_every_ref_raises_the_error(self, num_returns: int | None) -> None:
        """A RayTaskError that is also the user's exception, in each of the refs."""
        made = package(returned(error=KeyError("missing")), num_returns, True, FUNCTION)
        refs = made if isinstance(made, list) else [made]
        assert len(refs) == (num_returns or 1)
        for ref in refs:
            with pytest.raises(KeyError, match="missing") as raised:
                value_of(ref)
            assert isinstance(raised.value, RayTaskError)

    def test_an_unserializable_result_fails_at_get(self) -> None:
        """A value Ray could not serialize gives an error ref, not an error at .remote()."""
        ref = package(returned(threading.Lock()), None, copy=True, function=FUNCTION)
        with pytest.raises(RayTaskError, match="lock"):
            value_of(ref)


class TestGenerators:
    """Generator calls: an ``ObjectRefGenerator`` (streaming) or one ref of refs (dynamic)."""

    @pytest.mark.parametrize("num_returns", [None, "streaming"])
    def test_streaming_gives_a_ref_per_item(self, num_returns: str | None) -> None:
        """A ray.ObjectRefGenerator, one ref per item, in order."""
        made = package(returned(items=[1, 2, 3]), num_returns, True, FUNCTION)
        assert isinstance(made, ray.ObjectRefGenerator)
        assert [value_of(ref) for ref in made] == [1, 2, 3]

    def test_an_error_comes_after_the_items(self) -> None:
        """The items made before the error, then one ref that raises it; then the end."""
        made = package(returned(items=[1, 2], error=ValueError("at 3")), None, True, FUNCTION)
        refs = list(made)
        assert len(refs) == 3
        assert [value_of(ref) for ref in refs[:2]] == [1, 2]
        with pytest.raises(ValueError, match="at 3"):
            value_of(refs[2])

    @pytest.mark.parametrize(
        "produced",
        [
            pytest.param(returned(items=[4, 5]), id="generator"),
            pytest.param(returned([4, 5]), id="returned list"),
        ],
    )
    def test_dynamic_gives_one_ref_of_a_generator_of_refs(self, produced: Outcome) -> None:
        """num_returns="dynamic": one ref, whose value iterates the items' refs."""
        ref = package(produced, "dynamic", True, FUNCTION)
        assert isinstance(ref, ray.ObjectRef)
        inner = value_of(ref)
        assert [value_of(item) for item in inner] == [4, 5]

    def test_dynamic_error_is_the_one_refs_error(self) -> None:
        """A failed dynamic generator: its one ref raises the error."""
        ref = package(returned(items=[1], error=KeyError("gone")), "dynamic", True, FUNCTION)
        with pytest.raises(KeyError, match="gone"):
            value_of(ref)


class TestFailedRefs:
    """``failed_refs``: a call whose dependency failed returns that error in each ref."""

    @pytest.mark.parametrize(
        ("num_returns", "count"),
        [(None, 1), (1, 1), (3, 3), ("streaming", 1), ("dynamic", 1)],
    )
    def test_as_many_refs_as_the_call_returns(self, num_returns: Any, count: int) -> None:
        """One ref (not a list) for one return; a list of N refs for num_returns=N."""
        upstream = task_error(KeyError("upstream"), "jobs.load")
        made = failed_refs(upstream, num_returns, FUNCTION)
        refs = made if isinstance(made, list) else [made]
        assert isinstance(made, list) == (count > 1)
        assert len(refs) == count
        for ref in refs:
            with pytest.raises(KeyError, match="upstream"):
                value_of(ref)
