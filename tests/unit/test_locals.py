"""Unit tier: a failed call's locals, described without running the user's code (no Ray)."""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._output import locals as frame_locals
from raytrace_kit._output.locals import describe, frames_locals
from raytrace_kit._output.redact import ENVIRONMENT, REDACTED, environment_values, shown_value

TOKEN = "tok-unit-1a2b3c"  # a test value, not a credential


class Tripwire:
    """An object whose every hook of its own raises: describing it must not call one."""

    calls: list[str] = []  # noqa: RUF012 -- the test reads what was called, once per test

    def __repr__(self) -> str:
        self.calls.append("__repr__")
        raise AssertionError("repr called")

    def __len__(self) -> int:
        self.calls.append("__len__")
        raise AssertionError("len called")

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        raise AssertionError(f"{name} read")

    @property
    def shape(self) -> tuple[int, int]:
        self.calls.append("shape")
        raise AssertionError("shape read")

    @property  # type: ignore[misc] -- a class lying about its class, as mocks do
    def __class__(self) -> type:
        self.calls.append("__class__")
        raise AssertionError("__class__ read")


class CountedDict(dict[str, int]):
    def __len__(self) -> int:
        raise AssertionError("a subclass's __len__ called")


class TestDescribe:
    """describe(): a type and a shape, never a value, never the user's code run."""

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (0, "int"),
            (0.5, "float"),
            (True, "bool"),
            (None, "None"),
            ("x" * 40, "str of 40 chars"),
            ("x", "str of 1 char"),
            (b"abc", "bytes of 3 B"),
            (b"x" * (1_258_292), "bytes of 1.2 MiB"),
            (bytearray(5000), "bytearray of 4.9 KiB"),
            ([1, 2, 3], "list of 3"),
            ({"a": 1, "b": 2, "c": 3}, "dict of 3 keys"),
            ({"a": 1}, "dict of 1 key"),
            (collections.OrderedDict(a=1), "OrderedDict of 1 key"),
            (collections.deque([1, 2]), "deque of 2"),
            (frozenset(), "frozenset of 0"),
            (np.zeros((1000, 12)), "ndarray of 1000x12 float64"),
            (np.float64(1.5), "float64"),
            (pd.DataFrame(np.zeros((1000, 12))), "DataFrame of 1000x12"),
            (pd.Series([1, 2, 3]), "Series of 3 int64"),
            (pa.table({"a": [1, 2]}), "Table of 2x1"),
            (pa.array([1, 2]), "Int64Array of 2 int64"),
            (ValueError("secret message"), "ValueError"),
            (os, "module os"),
            (dict, "class dict"),
        ],
    )
    def test_kinds(self, value: object, expected: str) -> None:
        assert describe(value) == expected

    def test_no_code_of_the_values_class_runs(self) -> None:
        """No __repr__, __len__, __getattr__, property or __class__ of the user's is asked."""
        Tripwire.calls.clear()
        assert describe(Tripwire()) == "Tripwire"
        assert describe(CountedDict(a=1)) == "CountedDict of 1 key"  # dict's own length
        assert Tripwire.calls == []

    def test_a_frame_with_a_column_named_dtype_says_no_data(self) -> None:
        """A DataFrame's __getattr__ gives columns: only the attributes of its class are read."""
        assert describe(pd.DataFrame({"dtype": ["hunter2"]})) == "DataFrame of 1x1"

    @given(st.text())
    def test_a_string_says_its_length_only(self, text: str) -> None:
        assert describe(text) == describe("x" * len(text))

    @given(st.dictionaries(st.text(), st.text() | st.integers(), max_size=5))
    def test_a_dict_says_how_many_keys_only(self, mapping: dict[str, Any]) -> None:
        count = len(mapping)
        assert describe(mapping) == f"dict of {count} key{'' if count == 1 else 's'}"

    @given(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
            lambda inner: st.lists(inner) | st.tuples(inner) | st.dictionaries(st.text(), inner),
            max_leaves=20,
        )
    )
    def test_never_long_never_a_value(self, value: object) -> None:
        text = describe(value)
        assert 0 < len(text) <= frame_locals.DESCRIPTION_CHARS
        assert text.split(" ")[0] == type(value).__name__ or value is None

    def test_a_long_type_name_is_cut(self) -> None:
        kind = type("T" * 300, (), {})
        assert len(describe(kind())) == frame_locals.DESCRIPTION_CHARS


def _fail(qty: int, discount: float, api_token: str) -> float:
    total = 100
    return total * discount / qty


def _error(function: Any, *args: Any, **kwargs: Any) -> BaseException:
    try:
        function(*args, **kwargs)
    except BaseException as error:  # the tests look at any error
        return error
    raise AssertionError("did not fail")


class TestFramesLocals:
    """frames_locals(): the user's frames, capped; values only when asked, secrets out."""

    def test_descriptions_of_the_failing_frame(self) -> None:
        error = _error(_fail, 0, 0.5, api_token=TOKEN)
        frames = frames_locals(error)
        assert [frame[2] for frame in frames] == ["_error", "_fail"]
        filename, line, function, described = frames[-1]
        assert (filename, function) == (__file__, "_fail")
        assert line == _fail.__code__.co_firstlineno + 2
        assert described == {
            "qty": "int", "discount": "float", "api_token": "str of 15 chars", "total": "int",
        }  # fmt: skip
        assert TOKEN not in repr(frames)

    def test_values_with_secrets_redacted(self) -> None:
        error = _error(_fail, 0, 0.5, api_token=TOKEN)
        *_, shown = frames_locals(error, values=True)[-1]
        assert shown == {"qty": "0", "discount": "0.5", "api_token": REDACTED, "total": "100"}

    def test_the_environments_values_are_never_shown(self, monkeypatch: Any) -> None:
        monkeypatch.setenv("SERVICE_URL_FOR_TEST", "https://internal.example:8443/v1")

        def uses_environment() -> None:
            url = os.environ["SERVICE_URL_FOR_TEST"]
            joined = f"calling {url} now"
            environment = os.environ
            copied = dict(os.environ)
            nested = [{"where": url}]
            short = "true"
            raise RuntimeError(joined, environment, copied, nested, short)

        *_, shown = frames_locals(_error(uses_environment), values=True)[-1]
        assert shown["url"] == shown["joined"] == REDACTED
        assert shown["environment"] == shown["copied"] == ENVIRONMENT
        assert shown["nested"] == f"[{{'where': {REDACTED}}}]"
        assert shown["short"] == "'true'"  # under 8 characters: a setting, shown
        assert "internal.example" not in repr(shown)

    def test_self_and_dunders_have_no_value(self) -> None:
        class Order:
            def pay(self) -> None:
                __hidden__ = 1  # noqa: F841 -- a dunder local: left out
                raise ValueError("no")

        *_, described, shown = frames_locals(_error(Order().pay), values=True)[-1]
        assert described == {"self": "Order"}
        assert shown == {}

    def test_locals_per_frame_are_capped(self) -> None:
        namespace: dict[str, Any] = {}
        body = "".join(f"    v{i} = {i}\n" for i in range(40))
        exec(f"def many():\n{body}    raise ValueError('x')\n", namespace)  # noqa: S102 -- a frame of 40 locals
        *_, described = frames_locals(_error(namespace["many"]))[-1]
        assert len(described) == frame_locals.MAX_LOCALS + 1
        assert described[frame_locals.MORE] == "10 more"
        assert list(described)[:2] == ["v0", "v1"]

    def test_frames_are_capped_keeping_the_innermost(self) -> None:
        def down(depth: int) -> None:
            if depth == 0:
                raise ValueError("bottom")
            down(depth - 1)

        frames = frames_locals(_error(down, 30))
        assert len(frames) == frame_locals.MAX_FRAMES
        assert frames[-1][2] == "down"
        assert frames[-1][3] == {"depth": "int", "down": "function down"}  # its own cell
        assert [frame[1] for frame in frames[-2:]] == [
            down.__code__.co_firstlineno + 3, down.__code__.co_firstlineno + 2,
        ]  # fmt: skip

    def test_the_whole_record_is_capped(self) -> None:
        """Ten 200-character values a frame: past the cap, the outermost frames go."""
        namespace: dict[str, Any] = {}
        body = "".join(f"    v{i} = 'x' * 1000\n" for i in range(10))
        exec(  # noqa: S102 -- a recursion whose frames hold ten long strings each
            f"def wide(depth):\n{body}    if depth == 0:\n        raise ValueError('x')\n"
            "    wide(depth - 1)\n",
            namespace,
        )
        frames = frames_locals(_error(namespace["wide"], 15), values=True)
        size = sum(frame_locals._size(frame) for frame in frames)
        assert size <= frame_locals.LOCALS_CHARS
        assert 1 < len(frames) < 16
        assert frames[-1][4]["depth"] == "0"  # the innermost kept

    def test_a_chained_cause_comes_first(self) -> None:
        def inner(rows: list[int]) -> None:
            raise KeyError(rows[0])

        def outer() -> None:
            batch = [7]
            try:
                inner(batch)
            except KeyError as cause:
                raise ValueError("bad batch") from cause

        functions = [frame[2] for frame in frames_locals(_error(outer))]
        # Printed first: the cause's frames (outer at the call, inner), then outer's raise.
        assert functions == ["outer", "inner", "_error", "outer"]

    def test_the_kits_and_the_stdlibs_frames_are_left_out(self) -> None:
        import json  # noqa: PLC0415 -- the stdlib frames of a failing json.loads

        frames = frames_locals(_error(json.loads, "{"))
        assert [frame[2] for frame in frames] == ["_error"]

    def test_a_class_bodys_own_namespace_is_not_read(self) -> None:
        """A metaclass's __prepare__ mapping: its items() would be the user's code."""

        class Namespace(collections.UserDict[str, Any]):
            def items(self) -> Any:
                raise AssertionError("the user's mapping was read")

        class Meta(type):
            @classmethod
            def __prepare__(cls, name: str, bases: tuple[type, ...], **kw: Any) -> Any:
                return Namespace()

            def __new__(cls, name: str, bases: tuple[type, ...], namespace: Any) -> Any:
                return super().__new__(cls, name, bases, dict(namespace))

        def declare() -> None:
            class Model(metaclass=Meta):
                size = 3
                raise ValueError(size)

        frames = frames_locals(_error(declare))
        assert [(frame[2], frame[3]) for frame in frames[-2:]] == [
            ("declare", {"Meta": "class Meta"}), ("Model", {}),
        ]  # fmt: skip

    def test_a_repr_that_raises_costs_only_itself(self) -> None:
        def fails() -> None:
            odd, rows = Tripwire(), [1]
            raise ValueError(odd, rows)

        *_, described, shown = frames_locals(_error(fails), values=True)[-1]
        assert described == {"odd": "Tripwire", "rows": "list of 1"}
        assert shown == {"odd": "<Tripwire whose __repr__ raised AssertionError>", "rows": "[1]"}


class TestShownValue:
    """shown_value(): log_args' repr, the environment's values out."""

    def test_environment_values_are_long_and_not_places(self) -> None:
        found = environment_values({"A": "x" * 8, "B": "short", "HOME": "/home/somebody"})
        assert found == ("x" * 8,)

    def test_a_long_string_holding_one_at_its_end_is_redacted(self) -> None:
        hidden = ("sk-live-0123456789",)
        assert shown_value("y" * 50_000 + "sk-live-0123456789", hidden) == REDACTED
        assert shown_value("plain", hidden) == "'plain'"


@pytest.fixture(autouse=True)
def _no_tripwire_calls() -> Iterator[None]:
    yield
    Tripwire.calls.clear()
