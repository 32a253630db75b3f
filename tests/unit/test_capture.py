"""Unit tier: what capture keeps of a failed call, and how an actor comes back (no Ray)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import ray.cloudpickle

from raytrace_kit._local.replay import restore
from raytrace_kit._options import CallSpec, DebugOptions
from raytrace_kit._worker import capture

SPEC = CallSpec("shop.checkout", "task", DebugOptions(capture="failures"))


def checkout(qty: int, order: dict[str, Any]) -> float:
    return 1 / qty


class Shop:
    def __init__(self) -> None:
        self.prices = {"apple": 1.5}

    def price_of(self, item: str) -> float:
        return self.prices[item]


class Slotted:
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 3


class Custom:
    def __init__(self) -> None:
        self.kept, self.dropped = 1, threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"kept": self.kept}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.kept, self.dropped = state["kept"], None


class TestUserClass:
    """The actor's class is the user's, not Ray's subclass of it (which has its name)."""

    def test_rays_subclass_is_passed_over(self) -> None:
        made = type("Shop", (Shop,), {})
        made.__module__, made.__qualname__ = Shop.__module__, Shop.__qualname__
        name = f"{Shop.__module__}.Shop.price_of"
        assert capture.user_class(made, name) is Shop
        assert capture.user_class(Shop, name) is Shop


class TestStateRoundTrip:
    """state_of() then restore() gives the instance back as pickle would, no __init__ run."""

    @pytest.mark.parametrize(
        ("cls", "read"),
        [
            (Shop, lambda o: o.prices),
            (Slotted, lambda o: o.count),
            (Custom, lambda o: (o.kept, o.dropped)),
        ],
        ids=["dict", "slots", "getstate"],
    )
    def test_round_trip(self, cls: type, read: Any) -> None:
        instance = cls()
        state = ray.cloudpickle.loads(ray.cloudpickle.dumps(capture.state_of(instance)))
        back = restore(cls, state)
        expected = (1, None) if cls is Custom else read(instance)
        assert (type(back), read(back)) == (cls, expected)


class TestPickled:
    """What cannot be kept says why, by argument name and type, never by value."""

    def test_over_the_cap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("RAYTRACE_CAPTURE_MAX_BYTES", "100")
        with pytest.raises(capture._NotKeptError, match="over the 100 bytes cap"):
            capture._pickled(SPEC, checkout, (0, {"note": "x" * 500}), {}, None)

    def test_the_argument_that_cannot_be_pickled_is_named(self) -> None:
        order = {"lock": threading.Lock(), "secret": "tok-never-shown"}
        with pytest.raises(capture._NotKeptError) as raised:
            capture._pickled(SPEC, checkout, (0,), {"order": order}, None)
        message = str(raised.value)
        assert message.startswith("argument 'order' (a dict) cannot be pickled (TypeError")
        assert "tok-never-shown" not in message

    def test_an_actor_state_that_cannot_be_pickled_leaves_the_arguments(self) -> None:
        shop = Shop()
        shop.prices = {"lock": threading.Lock()}  # type: ignore[dict-item] -- on purpose
        spec = CallSpec(f"{Shop.__module__}.Shop.price_of", "actor_method", SPEC.options)
        header, payload, missing = capture._pickled(spec, Shop.price_of, (shop, "pear"), {}, 1)
        assert missing is not None
        assert missing.startswith("the actor's state cannot be pickled (TypeError")
        assert (header["method"], header["actor_state_missing"]) == (True, missing)
        inputs = ray.cloudpickle.loads(payload)
        assert (inputs["args"], "actor_state" in inputs) == (("pear",), False)

    def test_a_task_keeps_its_code_and_path(self) -> None:
        header, payload, missing = capture._pickled(SPEC, checkout, (0,), {"order": {}}, None)
        assert missing is None
        assert (header["module"], header["qualname"], header["method"]) == (
            __name__, "checkout", False,
        )  # fmt: skip
        assert header["sys_path"]
        assert header["cwd"]
        inputs = ray.cloudpickle.loads(payload)
        assert (inputs["function"], inputs["args"], inputs["kwargs"]) == (
            checkout, (0,), {"order": {}},
        )  # fmt: skip
