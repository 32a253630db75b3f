"""The size probe of ``.remote()``'s arguments (``_worker.by_value``): sizes, objects (no Ray).

What a user relies on: an argument of a MiB or more passed by value is named with its
real size, the same live object keeps one serial (and a new object at a dead one's
address gets another), nothing small is named, and the probe never breaks a submission.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy
import pandas
import pyarrow
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as numpy_st

from raytrace_kit._worker.by_value import LARGE_BYTES, large_arguments, serial_of, size_of

MIB = 2**20


class _Sized:
    """Something with an ``nbytes`` of its own, weakly referable (as numpy arrays are)."""

    __slots__ = ("__weakref__", "nbytes")

    def __init__(self, nbytes: object) -> None:
        self.nbytes = nbytes


class _Raising:
    @property
    def nbytes(self) -> int:
        raise RuntimeError("no size")


class TestSizes:
    """What each kind of argument is taken to hold."""

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (b"x" * 1000, 1000),
            (bytearray(2000), 2000),
            (memoryview(b"abc"), 3),
            (numpy.zeros((10, 10), dtype=numpy.float32), 400),
            (pandas.Series(numpy.zeros(100)), 800),
            (pyarrow.table({"a": numpy.zeros(100)}), 800),
            (pyarrow.array(numpy.zeros(50)), 400),
            (1, 0),
            ("x" * 5_000_000, 0),  # strings are not sized (nor are lists, dicts...)
            ([numpy.zeros(10**6)], 0),  # nothing inside a container is looked at
            (None, 0),
            (_Sized(12345), 12345),
            (_Sized(numpy.int64(7)), 7),  # any integer
            (_Sized(2.5), 0),  # not an integer: small
            (_Raising(), 0),  # a size that raises: small
            (object(), 0),
        ],
    )
    def test_size_of(self, value: object, expected: int) -> None:
        """Each argument as its own size says, never pickled."""
        assert size_of(value) == expected

    def test_a_small_data_frame_is_not_asked(self) -> None:
        """Under 64 Ki cells, a DataFrame is small without memory_usage()."""

        class Frame(pandas.DataFrame):
            def memory_usage(self, *args: Any, **kwargs: Any) -> Any:
                raise AssertionError("asked")

        assert size_of(Frame({"a": numpy.zeros(1000)})) == 0

    def test_a_large_data_frame(self) -> None:
        """A DataFrame has no nbytes: its memory_usage(), index included."""
        frame = pandas.DataFrame({"a": numpy.zeros(100_000), "b": numpy.zeros(100_000)})
        assert size_of(frame) == int(frame.memory_usage(index=True).sum()) >= 1_600_000

    @settings(max_examples=60, deadline=None)
    @given(
        numpy_st.arrays(
            numpy_st.scalar_dtypes(), numpy_st.array_shapes(min_dims=0, max_dims=3, max_side=6)
        )
    )
    def test_any_numpy_array_is_its_nbytes(self, array: Any) -> None:
        """Every dtype and shape: numpy's own figure."""
        assert size_of(array) == array.nbytes


class TestLargeArguments:
    """Which arguments of a call are named in its record, and how."""

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(st.integers(0, 3 * MIB), max_size=4),
        st.dictionaries(
            st.sampled_from(["data", "weights", "x"]), st.integers(0, 3 * MIB), max_size=2
        ),
    )
    def test_exactly_the_large_ones_by_position_and_keyword(
        self, sizes: list[int], keyword_sizes: dict[str, int]
    ) -> None:
        """Each argument of LARGE_BYTES or more, where it is, its bytes; no others."""
        args = tuple(numpy.empty(n, dtype=numpy.uint8) for n in sizes)
        kwargs = {k: numpy.empty(n, dtype=numpy.uint8) for k, n in keyword_sizes.items()}
        found = large_arguments(args, kwargs) or []
        expected = [(i, n) for i, n in enumerate(sizes) if n >= LARGE_BYTES]
        expected += [(k, n) for k, n in keyword_sizes.items() if n >= LARGE_BYTES]
        assert [(where, size) for where, size, _, _ in found] == expected
        assert all(kind == "numpy.ndarray" for *_, kind in found)
        if not expected:
            assert large_arguments(args, kwargs) is None  # nothing added to the record

    def test_the_entry(self) -> None:
        """[where, bytes, serial, type]: the type by its package, the serial an int."""
        array = numpy.zeros(2 * MIB, dtype=numpy.uint8)
        frame = pandas.DataFrame({"a": numpy.zeros(200_000)})
        ((where, size, serial, kind), (where2, _, _, kind2)) = large_arguments(
            (7, array), {"frame": frame}
        ) or [(), ()]
        assert (where, size, kind) == (1, 2 * MIB, "numpy.ndarray")
        assert isinstance(serial, int)
        assert (where2, kind2) == ("frame", "pandas.DataFrame")

    def test_a_keyword_that_is_no_parameter_name_is_not_written(self) -> None:
        """``f.remote(**{"user@example.com": x})``: the key may be data, so ``**``."""
        array = numpy.zeros(2 * MIB, dtype=numpy.uint8)
        found = large_arguments((), {"user@example.com": array, "x" * 200: array})
        assert [entry[0] for entry in found or []] == ["**", "**"]

    def test_never_raises(self) -> None:
        """An argument whose type cannot even be looked at leaves the record without it."""

        class Meta(type):
            def __getattribute__(cls, name: str) -> Any:
                if name == "nbytes":
                    raise RuntimeError("no")
                return super().__getattribute__(name)

        class Odd(metaclass=Meta):
            pass

        array = numpy.zeros(2 * MIB, dtype=numpy.uint8)
        found = large_arguments((Odd(), array), {"odd": Odd()})
        assert [entry[:2] for entry in found or []] == [[1, 2 * MIB]]


class TestSerials:
    """Which object an argument is: the same while it lives, another once it died."""

    def test_the_same_object_keeps_its_serial(self) -> None:
        """The same array in ten calls: one serial; two arrays: two."""
        a = numpy.zeros(10)
        b = numpy.zeros(10)
        assert len({serial_of(a) for _ in range(10)}) == 1
        assert serial_of(a) != serial_of(b)

    def test_a_new_object_at_a_dead_ones_address_is_another(self) -> None:
        """CPython gives a new object a dead one's address (its id) at once: a new serial."""
        reused = 0
        for _ in range(50):
            old = _Sized(5)
            address, serial = id(old), serial_of(old)
            del old
            gc.collect()
            new = _Sized(5)
            if id(new) == address:
                reused += 1
                assert serial_of(new) != serial
        assert reused  # the case this guards against did happen

    def test_objects_without_weak_references_have_none(self) -> None:
        """A bytes object cannot be told from a new one at its address: no serial."""
        assert serial_of(b"x" * 10) is None
        assert serial_of(bytearray(10)) is None

    def test_the_registry_forgets_the_dead(self) -> None:
        """Only weak references are kept, and a dead object's entry goes."""
        from raytrace_kit._worker import state as worker_state  # noqa: PLC0415

        before = len(worker_state.state.large_objects)
        arrays = [numpy.zeros(3) for _ in range(20)]
        for array in arrays:
            serial_of(array)
        assert len(worker_state.state.large_objects) == before + 20
        del arrays, array
        gc.collect()
        assert len(worker_state.state.large_objects) == before
