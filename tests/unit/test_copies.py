"""Local mode's copies (``_local.copies``): what a round trip through Ray's serializer gives.

Atoms and flat lists and dicts of atoms are copied without pickling (``copy_flat``); the
copy must be the one pickling gives: equal, of the same types all the way down, and
sharing no container with the original.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._local.copies import NOT_FLAT, copy_flat, copy_value
from raytrace_kit._local.refs import value_ref

KEYS = st.one_of(
    st.integers(), st.text(max_size=5), st.binary(max_size=5), st.booleans(), st.none()
)
ATOMS = st.one_of(KEYS, st.floats(allow_nan=False), st.complex_numbers(allow_nan=False))
VALUES = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=12,
)


def shape(value: Any) -> Any:
    """The value's types, all the way down, and its values: equal only if both are."""
    if isinstance(value, list | tuple):
        return (type(value), [shape(item) for item in value])
    if isinstance(value, dict):
        return (type(value), [(shape(k), shape(v)) for k, v in value.items()])
    return (type(value), value)


def containers(value: Any) -> set[int]:
    """The ids of the mutable containers in ``value``."""
    found: set[int] = set()
    if isinstance(value, list):
        found.add(id(value))
        for item in value:
            found |= containers(item)
    elif isinstance(value, dict):
        found.add(id(value))
        for item in value.values():
            found |= containers(item)
    elif isinstance(value, tuple):
        for item in value:
            found |= containers(item)
    return found


@given(VALUES)
def test_a_copy_is_the_pickle_round_trip(value: Any) -> None:
    """Flat or not: equal to what pickling gives, types included, and no container shared."""
    copied = copy_value(value)
    assert shape(copied) == shape(pickle.loads(pickle.dumps(value)))
    assert not containers(copied) & containers(value)


@given(st.lists(ATOMS, max_size=8), st.dictionaries(KEYS, ATOMS, max_size=8))
def test_flat_containers_are_copied_without_pickling(
    items: list[Any], table: dict[Any, Any]
) -> None:
    """A list or dict of atoms: a fresh container; a tuple of atoms: itself."""
    for value in (items, table):
        copied = copy_flat(value)
        assert copied == value
        assert copied is not value
    as_tuple = tuple(items)
    assert copy_flat(as_tuple) is as_tuple


class _MyList(list):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    "value",
    [
        [1, [2]],  # nested
        [1, (2, [3])],  # a tuple holding a list
        {"a": [1]},
        {(1, 2): 3},  # a tuple key: left to the pickler, which keeps it a tuple
        _MyList([1]),  # a subclass: its own pickling may differ
        [object()],
        {1, 2},  # a set
    ],
    ids=repr,
)
def test_anything_else_is_left_to_the_pickler(value: Any) -> None:
    assert copy_flat(value) is NOT_FLAT


def test_each_get_of_a_flat_value_is_a_fresh_copy() -> None:
    """As Ray deserializes a fresh copy at each ray.get: mutating one changes no other."""
    returned = [1, "two"]
    ref = value_ref(returned, copy=True, function="m.f")
    returned.append("after")  # the call's own object, changed after it returned
    first = ref.local_get()
    first.append("mutated")
    assert ref.local_get() == [1, "two"]
