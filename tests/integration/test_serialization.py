"""Tests for check_serializable() and @debuggable(check=...): culprits named before submission."""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from hypothesis import given, settings
from hypothesis import strategies as st

import raytrace_kit
from raytrace_kit import (
    NotSerializableError,
    RaytraceKitError,
    check_serializable,
    debuggable,
    local_mode,
)
from tests import helpers
from tests.helpers import events_of


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    """A real multiprocessing pool, the classic thing a closure should not capture."""
    created = multiprocessing.get_context("spawn").Pool(1)
    yield created
    created.terminate()


# Module globals, as in the seed documents' examples.
POOL: Any = None
LOCK = threading.Lock()


class PoolAndLock:
    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.lock = threading.Lock()
        self.name = "fine"


@dataclasses.dataclass
class Settings:
    path: str
    lock: Any


class PickleCounter:
    """Counts how often it is pickled (each check_serializable() pickles it once)."""

    pickled = 0

    def __reduce__(self) -> tuple[Any, ...]:
        PickleCounter.pickled += 1
        return (PickleCounter, ())


COUNTER = PickleCounter()


class TestReport:
    """check_serializable() names every culprit, its path, scope and a fix."""

    def test_global_pool_in_special_business(self, pool: Any) -> None:
        """The seed example: a function capturing a global Pool names 'POOL', global."""

        # Defined here, it ships by value with its globals, as a function of a __main__
        # script (the seed's case) or a decorated module function does. A plain function
        # of an importable module ships by reference: its globals never travel.
        def special_business(x: int) -> list[int]:
            return POOL.map(abs, [x])  # type: ignore[no-any-return]

        global POOL  # noqa: PLW0603 -- the example is about a module global
        POOL = pool
        try:
            report = check_serializable(special_business, name="special_business")
        finally:
            POOL = None
        assert not report.ok
        (failure,) = report.failures
        assert (failure.name, failure.scope) == ("POOL", "global")
        assert failure.path == ("special_business", "POOL")
        assert failure.type_name == "multiprocessing.pool.Pool"
        assert "create it inside the function" in failure.fix

    def test_nested_closure(self) -> None:
        """A lock captured from an enclosing function is a nonlocal."""

        def make() -> Any:
            guard = threading.Lock()

            def inner() -> bool:
                return guard.locked()

            return inner

        (failure,) = check_serializable(make()).failures
        assert (failure.name, failure.scope, failure.type_name) == (
            "guard",
            "nonlocal",
            "_thread.lock",
        )

    def test_instance_with_pool_and_lock_names_both(self, pool: Any) -> None:
        """Ray stops at the first failure on a level; the report names both members."""
        report = check_serializable(PoolAndLock(pool), name="holder")
        assert {(f.dotted_path, f.scope) for f in report.failures} == {
            ("holder.pool", "attribute"),
            ("holder.lock", "attribute"),
        }

    def test_lock_inside_dict_inside_list(self) -> None:
        """The exact element inside containers is named."""
        records = [{"id": 1}, {"id": 2, "guard": threading.Lock()}]
        (failure,) = check_serializable(records, name="records", scope="argument").failures
        assert failure.name == "records[1]['guard']"
        assert failure.scope == "item"

    def test_dataclass_field(self) -> None:
        """Dataclass fields are named."""
        (failure,) = check_serializable(Settings("/data", threading.Lock())).failures
        assert failure.name == "lock"
        assert failure.dotted_path.endswith("Settings object>.lock")

    def test_healthy_objects(self) -> None:
        """Serializable things report ok, with no failures."""
        for obj in (check_serializable, {"a": [1, 2]}, Settings("/data", None), len):
            report = check_serializable(obj)
            assert report.ok
            assert report.failures == ()
            assert bool(report)
            report.raise_if_failed("submitting it")  # nothing to raise

    def test_raise_if_failed_raises_what_submission_raises(self) -> None:
        """raise_if_failed() raises the error a rejected submission raises, report attached."""
        report = check_serializable(Settings("/data", threading.Lock()), name="settings")
        with pytest.raises(NotSerializableError) as raised:
            report.raise_if_failed("submitting it")
        assert raised.value.report is report
        assert str(raised.value) == str(report.exception("submitting it"))
        assert str(raised.value).startswith("submitting it: Ray cannot serialize settings")
        assert "settings.lock [attribute, _thread.lock]" in str(raised.value)

    def test_str_and_html(self) -> None:
        """str() is a small tree without ANSI codes; _repr_html_ is a table."""
        report = check_serializable({"guard": LOCK}, name="config")
        text = str(report)
        assert "config['guard']" in text
        assert "\x1b[" not in text
        assert "└─" in text
        html = report._repr_html_()
        assert "config[&#x27;guard&#x27;]" in html  # escaped
        assert any(row[0].endswith("config['guard']") for row in helpers.table_rows(html))

    @settings(max_examples=60, deadline=None)
    @given(
        st.recursive(
            st.just("LEAF"),
            lambda inner: st.one_of(
                st.lists(inner, min_size=1, max_size=3),
                st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, min_size=1),
            ),
            max_leaves=8,
        ),
        st.randoms(use_true_random=False),
    )
    def test_any_nesting_names_the_exact_element(self, shape: Any, rng: Any) -> None:
        """A lock placed anywhere in nested lists and dicts is named by its exact path."""
        leaves: list[tuple[Any, Any, str]] = []

        def build(node: Any, path: str) -> Any:
            if node == "LEAF":
                return 0
            if isinstance(node, list):
                built_list = [build(child, f"{path}[{i}]") for i, child in enumerate(node)]
                for i, child in enumerate(node):
                    if child == "LEAF":
                        leaves.append((built_list, i, f"{path}[{i}]"))
                return built_list
            built_dict = {k: build(v, f"{path}[{k!r}]") for k, v in node.items()}
            for k, v in node.items():
                if v == "LEAF":
                    leaves.append((built_dict, k, f"{path}[{k!r}]"))
            return built_dict

        root = build(shape, "data")
        if not leaves:
            return  # the shape is a bare leaf: nothing to hide a lock in
        container, key, expected = rng.choice(leaves)
        container[key] = threading.Lock()
        report = check_serializable(root, name="data", depth=10)
        assert [f.name for f in report.failures] == [expected]


@pytest.mark.usefixtures("ray_session")
class TestDebuggableChecks:
    """@debuggable(check=...) fails before anything is submitted, and names the fix."""

    def test_first_check_rejects_before_submission(self) -> None:
        """check='first' (default): a captured lock fails at the first .remote()."""

        @debuggable
        @ray.remote
        def guarded(x: int) -> int:
            with LOCK:
                return x

        with pytest.raises(NotSerializableError, match=r"guarded\.LOCK \[global") as info:
            guarded.remote(1)
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, RaytraceKitError)
        assert info.value.report.failures[0].name == "LOCK"
        assert events_of(guarded, "call.start") == []  # nothing ran
        # The traceback ends at the .remote() line, through the proxy, not the checker.
        frames = traceback.extract_tb(info.value.__traceback__)
        assert frames[0].line == "guarded.remote(1)"
        assert [Path(f.filename).name for f in frames[1:]] == ["function.py", "proxy.py"]
        (event,) = [e for e in raytrace_kit.read_events() if e["event"] == "serialization.fail"][
            -1:
        ]
        assert event["failures"][0]["name"] == "LOCK"
        assert event["failures"][0]["scope"] == "global"

    def test_healthy_function_is_checked_once(self) -> None:
        """The verdict is cached per decorated object: later calls do not re-check."""

        def uses_counter(x: int) -> int:  # ships by value, with COUNTER
            return x + (COUNTER is not None)

        checked = debuggable(ray.remote(uses_counter))
        unchecked = debuggable(check="off")(ray.remote(uses_counter))
        PickleCounter.pickled = 0
        ray.get([checked.remote(i) for i in range(5)])
        with_check = PickleCounter.pickled
        PickleCounter.pickled = 0
        ray.get([unchecked.remote(i) for i in range(5)])
        without_check = PickleCounter.pickled
        # Ray pickles the function once to export it; the check adds exactly one more.
        assert with_check == without_check + 1

    def test_rays_own_argument_error_is_explained(self) -> None:
        """check='first': Ray's TypeError on an argument becomes NotSerializableError."""

        @debuggable
        @ray.remote
        def consume(records: list[dict[str, Any]]) -> int:
            return len(records)

        records = [{"id": 1}, {"id": 2, "guard": threading.Lock()}]
        with pytest.raises(NotSerializableError, match=re.escape("records[1]['guard']")) as info:
            consume.remote(records)
        assert "Could not serialize the argument" in str(info.value.__cause__)
        assert info.value.report.failures[0].scope == "item"

    def test_always_checks_arguments_before_ray_sees_them(self) -> None:
        """check='always': arguments are checked before submission."""

        @debuggable(check="always")
        @ray.remote
        def consume(settings: Settings) -> str:
            return settings.path

        with pytest.raises(NotSerializableError, match=r"settings\.lock") as info:
            consume.remote(Settings("/data", threading.Lock()))
        assert info.value.__cause__ is None  # Ray never saw it
        assert ray.get(consume.remote(Settings("/data", None))) == "/data"

    def test_always_checks_return_values_in_the_worker(self) -> None:
        """check='always': an unpicklable return value fails in the worker, named."""

        @debuggable(check="always")
        @ray.remote
        def leak() -> dict[str, Any]:
            return {"result": 1, "guard": threading.Lock()}

        # The message reaches Ray's logs: keys of returned data by position and type only;
        # the report object, in this process, still names the key exactly.
        with pytest.raises(NotSerializableError, match=r"\[<str key #1>\]") as info:
            ray.get(leak.remote())
        assert "'guard'" not in str(info.value)
        assert info.value.report.failures[0].name.endswith("['guard']")
        assert info.value.report.failures[0].scope == "item"
        (end,) = events_of(leak, "call.end")
        assert (end["status"], end["error_type"]) == ("error", "NotSerializableError")

    def test_actor_constructor_argument_holding_a_lock(self, pool: Any) -> None:
        """An actor whose constructor argument holds a pool and a lock: both named."""

        @debuggable
        @ray.remote
        class Service:
            def __init__(self, resources: PoolAndLock) -> None:
                self.resources = resources

        with pytest.raises(NotSerializableError, match=r"resources\.lock") as info:
            Service.remote(PoolAndLock(pool))
        names = {f.dotted_path for f in info.value.report.failures}
        assert names == {"resources.pool", "resources.lock"}

    def test_on_error_and_off(self) -> None:
        """'on_error' explains Ray's failure; 'off' leaves Ray's error untouched."""

        def guarded() -> bool:
            return LOCK.locked()

        explained = debuggable(check="on_error")(ray.remote(guarded))
        with pytest.raises(NotSerializableError, match="LOCK"):
            explained.remote()
        untouched = debuggable(check="off")(ray.remote(guarded))
        with pytest.raises(TypeError) as info:
            untouched.remote()
        assert not isinstance(info.value, NotSerializableError)

    def test_invalid_check_value(self) -> None:
        """A wrong check value fails at decoration, listing the valid ones."""
        with pytest.raises(raytrace_kit.InvalidOptionError, match="'first', 'always'"):
            debuggable(check="sometimes")


class TestLocalModeChecks:
    """Checks apply in local mode too: Ray would fail on a cluster."""

    @pytest.mark.usefixtures("no_ray")
    def test_local_call_with_a_captured_lock_is_rejected(self) -> None:
        """A function that could not run on a cluster is rejected in local mode too."""

        @debuggable
        @ray.remote
        def guarded() -> bool:
            return LOCK.locked()

        with local_mode(), pytest.raises(NotSerializableError, match="LOCK"):
            guarded.remote()
        assert not ray.is_initialized()
