"""The stand-ins Ray Data is handed for a user's UDF: named and shaped as the user's own.

Ray Data decides how to run a UDF by what it is (a class or not, a coroutine function or
not) and names its operator after it; the stand-ins must look the same on each count.
"""

from __future__ import annotations

import asyncio
import functools
import inspect

import numpy as np
import pandas as pd
import pyarrow as pa

from raytrace_kit._worker import data_udf
from raytrace_kit._worker.data_class import data_class


def clean(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return batch


class Base:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class AddOffset(Base):
    def __init__(self, offset: int) -> None:
        super().__init__(offset * 2)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"x": batch["x"] + self.offset}


class Tagger:
    async def __call__(self, batch: dict[str, int]) -> dict[str, int]:
        await asyncio.sleep(0)
        return {**batch, "tag": 1}


class Streamer:
    async def __call__(self, batch: dict[str, int]) -> object:
        yield batch


class TestSizes:
    def test_each_batch_format(self) -> None:
        column = np.arange(10, dtype=np.int64)
        assert data_udf.sizes({"a": column, "b": column}) == (10, 160)
        assert data_udf.sizes(pa.table({"a": column})) == (10, 80)
        rows, size = data_udf.sizes(pd.DataFrame({"a": column}))
        assert rows == 10
        assert size >= 80
        assert data_udf.sizes(column) == (10, 80)  # add_column's UDF returns a column
        assert data_udf.sizes(object()) == (None, None)

    def test_never_raises(self) -> None:
        class Bad(dict):  # type: ignore[type-arg]
            def values(self) -> object:
                raise RuntimeError("no")

        assert data_udf.sizes(Bad()) == (None, None)


class TestFunctions:
    def test_named_as_ray_data_names_the_users(self) -> None:
        specs = data_udf.Specs("m.clean")
        made = data_udf.batch_function(clean, specs)
        assert inspect.isfunction(made)  # Ray Data names a function's operator by __name__
        assert (made.__name__, made.__module__, made.__qualname__) == (
            "clean",
            clean.__module__,
            "clean",
        )
        partial = data_udf.batch_function(functools.partial(clean), specs)
        assert partial.__name__ == "clean"
        obj = data_udf.row_function(AddOffset(1), specs)
        assert obj.__name__ == "AddOffset"  # a callable object: named after its class
        assert getattr(made, data_udf.MARK) is clean

    def test_without_a_spec_they_call_through(self) -> None:
        batch = {"x": np.arange(3)}
        assert data_udf.batch_function(clean, data_udf.Specs("m.clean"))(batch) is batch


class TestClasses:
    def test_the_subclass_looks_like_the_users_class(self) -> None:
        made = data_class(AddOffset, data_udf.Specs("m.AddOffset"))
        assert (made.__name__, made.__qualname__, made.__module__) == (
            "AddOffset",
            "AddOffset",
            AddOffset.__module__,
        )
        instance = made(3)
        assert isinstance(instance, AddOffset)
        assert instance.offset == 6  # super() in the user's __init__ still works
        assert instance({"x": np.array([1])})["x"].tolist() == [7]
        assert getattr(made, data_udf.MARK) is AddOffset

    def test_call_kind_is_kept(self) -> None:
        specs = data_udf.Specs("m")
        assert not inspect.iscoroutinefunction(data_class(AddOffset, specs).__call__)
        tagger = data_class(Tagger, specs)
        assert inspect.iscoroutinefunction(tagger.__call__)  # Ray Data runs it on its loop
        assert asyncio.run(tagger()({"a": 1})) == {"a": 1, "tag": 1}
        assert inspect.isasyncgenfunction(data_class(Streamer, specs).__call__)
        assert data_class(Tagger, specs).__call__.__qualname__ == "Tagger.__call__"
