"""Invisible on a cluster: the same program gives the same outcome with and without the kit.

Each row of a table runs one body against plain Ray and against @debuggable, and compares
what the program sees (a value, or the exception's type and message).
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import ray
from ray.dag import InputNode

from raytrace_kit import debuggable
from tests.helpers import events_of, start_shared_ray

pytestmark = pytest.mark.usefixtures("ray_session")


class Probe:
    """Asks, from inside an actor, what plain Ray promises about threads and state."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.local = threading.local()
        self.local.value = "set in __init__"
        self.init_thread = threading.current_thread().name

    def thread_name(self) -> str:
        return threading.current_thread().name

    def same_thread_as_init(self) -> bool:
        return threading.current_thread().name == self.init_thread

    def sqlite_from_init(self) -> int:
        return int(self.conn.execute("select 41 + 1").fetchone()[0])

    def thread_local_from_init(self) -> str | None:
        return getattr(self.local, "value", None)

    def install_signal_handler(self) -> str:
        previous = signal.signal(signal.SIGUSR1, lambda *_: None)
        signal.signal(signal.SIGUSR1, previous)
        return "installed"

    def event_loop(self) -> str:
        return type(asyncio.get_event_loop()).__name__

    def fails(self) -> None:
        raise KeyError("probe failure")

    @staticmethod
    def static(x: int) -> int:
        return x + 1

    @classmethod
    def klass(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"

    def __call__(self, x: int) -> int:
        return x * 2


@ray.remote(concurrency_groups={"io": 2})
class Grouped:
    """A class with concurrency groups of its own."""

    def default_thread(self) -> str:
        return threading.current_thread().name

    @ray.method(concurrency_group="io")
    def io_thread(self) -> str:
        return threading.current_thread().name


def outcome(call: Callable[[], Any]) -> Any:
    """What a program sees: the value, or the exception's cause type and message."""
    try:
        return ("value", call())
    except ray.exceptions.RayTaskError as error:
        cause = error.cause
        return ("error", type(cause).__name__, str(cause))
    except Exception as error:
        return ("error", type(error).__name__, str(error))


ACTOR_CASES: list[tuple[str, tuple[Any, ...]]] = [
    ("thread_name", ()),
    ("same_thread_as_init", ()),
    ("sqlite_from_init", ()),
    ("thread_local_from_init", ()),
    ("install_signal_handler", ()),
    ("event_loop", ()),
    ("fails", ()),
    ("static", (4,)),
    ("klass", (4,)),
    ("__call__", (21,)),
]


@pytest.fixture(scope="module")
def handles() -> Any:
    """One plain and one debuggable Probe actor, shared by the table's rows."""
    start_shared_ray()  # a module fixture is set up before the function-scoped ray_session
    plain = ray.remote(Probe).remote()
    kit = debuggable(ray.remote(Probe)).remote()
    yield plain, kit
    ray.kill(plain)
    ray.kill(kit)


class TestActorsAsPlainRay:
    """Debuggable actors run their methods where plain Ray runs them."""

    @pytest.mark.parametrize(("method", "args"), ACTOR_CASES, ids=[c[0] for c in ACTOR_CASES])
    def test_same_outcome(self, handles: Any, method: str, args: tuple[Any, ...]) -> None:
        """The program sees the same value or error with and without the kit."""
        plain, kit = handles
        expected = outcome(lambda: ray.get(getattr(plain, method).remote(*args)))
        assert outcome(lambda: ray.get(getattr(kit, method).remote(*args))) == expected

    def test_methods_run_on_the_main_thread(self, handles: Any) -> None:
        """As in plain Ray: no concurrency group of the kit's moves them to a pool thread."""
        _, kit = handles
        assert ray.get(kit.thread_name.remote()) == "MainThread"

    @pytest.mark.parametrize("method", ["static", "klass", "__call__"])
    def test_static_class_and_call_methods_are_instrumented(self, method: str) -> None:
        """staticmethod, classmethod and __call__ each write call.start and call.end."""
        cls = debuggable(ray.remote(Probe))
        handle = cls.remote()
        ray.get(getattr(handle, method).remote(3))
        ends = [e for e in events_of(Probe, "call.end") if e["function"].endswith(f".{method}")]
        assert len(ends) == 1
        assert ends[0]["status"] == "ok"
        assert ends[0]["kind"] == "actor_method"
        ray.kill(handle)

    def test_static_method_called_inside_a_method_is_part_of_it(self) -> None:
        """A static method used by a method is not a call of its own."""

        class UsesStatic:
            @staticmethod
            def helper(x: int) -> int:
                return x + 1

            def run(self, x: int) -> int:
                return self.helper(x)

        handle = debuggable(ray.remote(UsesStatic)).remote()
        assert ray.get(handle.run.remote(1)) == 2
        functions = [e["function"].rsplit(".", 1)[-1] for e in events_of(UsesStatic, "call.end")]
        assert sorted(functions) == ["__init__", "run"]
        ray.kill(handle)

    def test_own_concurrency_groups_unchanged(self) -> None:
        """A class's own groups keep their threads: the same names with and without the kit."""
        plain = Grouped.remote()
        kit = debuggable(Grouped).remote()
        for method in ("default_thread", "io_thread"):
            expected = ray.get(getattr(plain, method).remote())
            assert ray.get(getattr(kit, method).remote()) == expected
        # Ray's own rule: with groups, even the default group leaves the main thread.
        assert ray.get(plain.default_thread.remote()) != "MainThread"
        ray.kill(plain)
        ray.kill(kit)


class Counted:
    """A base whose __init_subclass__ counts the classes made from it in this process."""

    made: ClassVar[list[str]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        Counted.made.append(cls.__qualname__)
        super().__init_subclass__(**kwargs)


class ClassFacts(Counted):
    """What a method sees of its own class, in the actor's process."""

    def facts(self) -> tuple[Any, ...]:
        return (
            type(self).__qualname__,
            [klass.__qualname__ for klass in type(self).__mro__],
            list(Counted.made),
            isinstance(self, ClassFacts),
        )


class TestActorClassAsPlainRay:
    """The actor's class, subclassing, and Ray's own ray.remote: as plain Ray has them."""

    def test_same_class_mro_and_subclass_hooks(self) -> None:
        """The instance's class, its MRO and the __init_subclass__ runs are Ray's own."""
        plain = ray.remote(ClassFacts).remote()
        kit = debuggable(ray.remote(ClassFacts)).remote()
        expected = ray.get(plain.facts.remote())
        assert ray.get(kit.facts.remote()) == expected
        assert expected[3] is True
        ray.kill(plain)
        ray.kill(kit)

    def test_subclassing_refused_as_ray_refuses(self) -> None:
        """Subclassing one: Ray's ActorClassInheritanceException, with its message."""

        def subclass(base: Any) -> None:
            class Derived(base):  # type: ignore[misc,valid-type]
                pass

        expected = outcome(lambda: subclass(ray.remote(Adder)))
        assert outcome(lambda: subclass(debuggable(ray.remote(Adder)))) == expected
        assert expected[1] == "ActorClassInheritanceException"

    def test_submits_through_rays_own_remote(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With ray.remote replaced by a wrapper that routes back to the kit, calls work.

        Whole-program instrumentation (and tracing agents) replace the public name; the
        kit, which makes remote functions of its own, must use Ray's.
        """
        original = ray.remote
        routed: list[Any] = []

        def route(*args: Any, **kwargs: Any) -> Any:
            routed.append(args)
            made = original(*args, **kwargs)
            return debuggable(made) if args and not kwargs else made

        monkeypatch.setattr(ray, "remote", route)
        doubled = ray.remote(double)
        assert ray.get(doubled.remote(21)) == 42
        assert len(routed) == 1  # the user's own decoration only
        assert [e["status"] for e in events_of(double, "call.end")] == ["ok"]


def submit_from_a_thread(x: int) -> int:
    """A task whose own thread submits a child: the thread has none of the call's context."""
    box: list[int] = []
    thread = threading.Thread(target=lambda: box.append(ray.get(DOUBLE.remote(x))))
    thread.start()
    thread.join()
    return box[0]


class TestParentsAcrossThreads:
    """A call submitted from a thread that user code started inside a call names it."""

    def test_child_of_a_user_thread_names_the_call(self) -> None:
        parent = debuggable(ray.remote(submit_from_a_thread))
        assert ray.get(parent.remote(4)) == 8
        (started,) = events_of(submit_from_a_thread, "call.start")
        (child,) = events_of(double, "call.start")
        assert child["parent_call_id"] == started["call_id"]
        assert child["parent_task_id"] == started["task_id"]


class Adder:
    def __init__(self, k: int) -> None:
        self.k = k

    def add(self, x: int) -> int:
        return x + self.k


def double(x: int) -> int:
    return 2 * x


DOUBLE = debuggable(ray.remote(double))


class TestDags:
    """Ray DAGs built from debuggable functions and actors run as plain Ray's do."""

    @pytest.mark.parametrize("kit", [False, True], ids=["plain", "kit"])
    def test_actor_and_function_dag(self, kit: bool) -> None:
        """A ClassNode's method chained after a FunctionNode gives the same result."""
        wrap: Callable[[Any], Any] = debuggable if kit else (lambda x: x)
        adder_class = wrap(ray.remote(Adder))
        doubler = wrap(ray.remote(double))
        with InputNode() as inp:
            dag = adder_class.bind(10).add.bind(doubler.bind(inp))
        assert ray.get(dag.execute(5)) == 20
        if kit:
            assert [e["status"] for e in events_of(double, "call.end")] == ["ok"]
            assert [e["function"] for e in events_of(Adder, "call.end")][-1].endswith(".add")


class TestPinnedAsPlainRay:
    """Calls of a pinned function run where a plain task runs: the main thread."""

    def test_pinned_call_on_main_thread(self) -> None:
        """A pinned runner has no concurrency group either."""

        def thread_name() -> str:
            return threading.current_thread().name

        plain = ray.get(ray.remote(thread_name).remote())
        pinned = debuggable(pin=True)(ray.remote(num_cpus=0.1)(thread_name))
        assert ray.get(pinned.remote()) == plain == "MainThread"
        pinned.unpin()
