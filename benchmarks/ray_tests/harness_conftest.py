"""The work folder's conftest.py: Ray's own conftest, loaded so that it runs on the installed Ray.

compare.py copies this file into the temporary work folder as ``conftest.py``, beside the
fetched test files, Ray's conftest (renamed ``_ray_conftest.py``) and Ray's test helpers
(in ``_ray_tests/``, importable as ``ray.tests``). It is never imported from the repository.

The fetched files are older than the installed Ray (the search tool stores no version at
Ray 2.60's commit), so this file adapts the surroundings, never Ray's code:

- Ray's conftest is executed one top-level statement at a time (an import statement one
  name at a time); a statement that raises is skipped and listed in ``harness.json``.
- Modules and names Ray has moved since are found where they live now (``MOVED_MODULES``,
  ``MOVED_NAMES``, ``RENAMED_NAMES``); a module that cannot load here (``UNAVAILABLE``)
  is a stub whose every name raises when used, so that the file imports and only the tests
  that need it fail, in both runs alike.
- ``_system_config`` keys the installed GCS rejects at start (it exits on an unknown key)
  are dropped from the conftest's default config (``RETIRED_SYSTEM_CONFIG``).
- The tests compare.py leaves out (``RAY_TESTS_DESELECT``, exact node ids) are deselected.
- Fixtures that would run ``ray stop`` or kill processes by port skip instead: either ends
  Ray instances this harness did not start (``UNSAFE_FIXTURES``).
- ``async def`` tests marked ``asyncio`` run on an event loop (the ``event_loop`` fixture's
  when they ask for it), as pytest-asyncio ran them then; it is not installed here.
- A test that runs past ``RAY_TESTS_TIMEOUT`` seconds (setup, call or teardown) fails with
  a timeout, and the run goes on to the next test.

Both runs (plain and with the kit's plugin) load this same file, so nothing here can make
them differ.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import inspect
import json
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
import ray

HERE = Path(__file__).parent
RAY_CONFTEST = HERE / "_ray_conftest.py"
HELPERS = HERE / "_ray_tests"  # the package ray.tests: client_test_utils.py
REPORT = HERE / "harness.json"
TIMEOUT = float(os.environ.get("RAY_TESTS_TIMEOUT", "180"))

# Old module -> where the installed Ray has it (import-time aliases, only if the old is gone).
MOVED_MODULES = {
    "ray.test_utils": "ray._private.test_utils",
    "ray.ray_constants": "ray._private.ray_constants",
    "ray.worker": "ray._private.worker",
    "ray.state": "ray._private.state",
}
# Module -> the module that now holds names it no longer has (SignalActor, Semaphore, ...).
MOVED_NAMES = {
    "ray._private.test_utils": "ray._common.test_utils",
    "ray._private.utils": "ray._common.utils",  # reset_ray_address, in every fixture's teardown
}
# (module, old name) -> the name it has now.
RENAMED_NAMES = {
    ("ray._private.test_utils", "enable_external_redis"): "external_redis_test_enabled"
}
# Modules the fetched files import that cannot load with this install, and why.
UNAVAILABLE = {
    "ray._private.gcs_pubsub": "it needs the grpc package, not installed here",
    "setproctitle": "it is not installed here (Ray no longer bundles it)",
}
# The installed GCS exits at start on these ("Received unexpected config parameter").
RETIRED_SYSTEM_CONFIG = frozenset(
    {"num_heartbeats_timeout", "raylet_heartbeat_period_milliseconds"}
)
UNSAFE_FIXTURES = {
    "call_ray_start": "runs `ray stop`, which ends every Ray instance on the machine",
    "call_ray_start_with_external_redis": "runs `ray stop`",
    "call_ray_stop_only": "runs `ray stop`",
    "make_sure_dashboard_http_port_unused": "kills whichever process holds a port",
}

_report: dict[str, list[str]] = {"shims": [], "skipped_from_ray_conftest": []}


class Unavailable:
    """Stands for a name that cannot load here; using it raises, naming why."""

    def __init__(self, name: str, why: str) -> None:
        self._name = name
        self._why = why

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = f"{self._name} is unavailable in this harness: {self._why}"
        raise RuntimeError(msg)

    def __getattr__(self, attribute: str) -> Any:
        return Unavailable(f"{self._name}.{attribute}", self._why)


def _alias_moved_modules() -> None:
    for old, new in MOVED_MODULES.items():
        try:
            importlib.import_module(old)
        except ImportError:
            module = importlib.import_module(new)
            sys.modules[old] = module
            parent, _, child = old.rpartition(".")
            if not hasattr(sys.modules[parent], child):
                setattr(sys.modules[parent], child, module)
            _report["shims"].append(f"import {old} -> {new}")


def _find_moved_names() -> None:
    for name, fallback_name in MOVED_NAMES.items():
        module = importlib.import_module(name)
        fallback = importlib.import_module(fallback_name)
        renamed = {old: new for (mod, old), new in RENAMED_NAMES.items() if mod == name}
        own_getattr = getattr(module, "__getattr__", None)

        def lookup(
            attribute: str,
            module: Any = module,
            fallback: Any = fallback,
            renamed: dict[str, str] = renamed,
            own: Any = own_getattr,
        ) -> Any:
            if own is not None:  # the module's own __getattr__ first, if it has one
                with contextlib.suppress(AttributeError):
                    return own(attribute)
            if attribute in renamed:
                return getattr(module, renamed[attribute])
            if attribute.startswith("__") or not hasattr(fallback, attribute):
                msg = f"module {module.__name__!r} has no attribute {attribute!r}"
                raise AttributeError(msg)
            return getattr(fallback, attribute)

        module.__getattr__ = lookup  # type: ignore[method-assign]  # PEP 562: missing names only
        _report["shims"].append(f"names missing from {name} -> {fallback_name}, renamed {renamed}")


def _stub_unavailable_modules() -> None:
    for name, why in UNAVAILABLE.items():
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__getattr__ = lambda attribute, name=name, why=why: Unavailable(  # type: ignore[method-assign]
                f"{name}.{attribute}", why
            )
            sys.modules[name] = stub
            _report["shims"].append(f"stub {name}: {why}")


def _ray_tests_package() -> None:
    package = types.ModuleType("ray.tests")
    package.__path__ = [str(HELPERS)]
    sys.modules["ray.tests"] = package
    ray.tests = package  # type: ignore[attr-defined]  # Ray's wheel ships no ray.tests
    _report["shims"].append(f"package ray.tests -> {HELPERS.name}/ (Ray's test helpers)")


def _statements(tree: ast.Module) -> Generator[ast.stmt, None, None]:
    """Each top-level statement; an import of several names, one name at a time."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and len(node.names) > 1:
            for alias in node.names:
                yield ast.copy_location(ast.ImportFrom(node.module, [alias], node.level), node)
        else:
            yield node


def _load_ray_conftest(namespace: dict[str, Any]) -> None:
    source = RAY_CONFTEST.read_text()
    lines = source.splitlines()
    for statement in _statements(ast.parse(source, str(RAY_CONFTEST))):
        code = compile(ast.Module([statement], []), str(RAY_CONFTEST), "exec")
        try:
            exec(code, namespace)  # noqa: S102  # Ray's own conftest, fetched and checked by compare.py
        except Exception as error:  # skip what fails here, as the module docstring says
            first = lines[statement.lineno - 1].strip()
            _report["skipped_from_ray_conftest"].append(
                f"line {statement.lineno}: {first} ({type(error).__name__}: {error})"
            )


def _drop_retired_config(namespace: dict[str, Any]) -> None:
    original: Callable[[], dict[str, Any]] = namespace["get_default_fixure_system_config"]

    def get_default_fixure_system_config() -> dict[str, Any]:
        config = original()
        return {key: value for key, value in config.items() if key not in RETIRED_SYSTEM_CONFIG}

    namespace["get_default_fixure_system_config"] = get_default_fixure_system_config
    _report["shims"].append(f"default _system_config without {sorted(RETIRED_SYSTEM_CONFIG)}")


def _refuse(name: str, why: str) -> Any:
    @pytest.fixture(name=name)
    def refused() -> None:
        pytest.skip(f"fixture {name} not run by this harness: it {why}")

    return refused


_alias_moved_modules()
_find_moved_names()
_stub_unavailable_modules()
_ray_tests_package()
_load_ray_conftest(globals())
_drop_retired_config(globals())
for _name, _why in UNSAFE_FIXTURES.items():
    globals()[_name] = _refuse(_name, _why)
REPORT.write_text(json.dumps(_report, indent=1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests compare.py names: exactly those, or their parametrized cases.

    (pytest's own ``--deselect`` takes a prefix: ``test_a`` would take ``test_a_b`` too.)
    """
    names = set(json.loads(os.environ.get("RAY_TESTS_DESELECT", "[]")))
    chosen, left_out = [], []
    for item in items:
        if item.nodeid in names or item.nodeid.split("[")[0] in names:
            left_out.append(item)
        else:
            chosen.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = chosen


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "asyncio: run this async def test on an event loop")


@pytest.fixture
def event_loop() -> Generator[asyncio.AbstractEventLoop, None, None]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = inspect.signature(pyfuncitem.obj).parameters
    arguments = {name: pyfuncitem.funcargs[name] for name in names}
    # Not asyncio.run: its SIGINT handler only cancels the task, which a test blocked in
    # ray.get never sees, so the watchdog below could not end it.
    given = pyfuncitem.funcargs.get("event_loop")
    loop = given if isinstance(given, asyncio.AbstractEventLoop) else asyncio.new_event_loop()
    try:
        loop.run_until_complete(pyfuncitem.obj(**arguments))
    finally:
        if loop is not given:
            loop.close()
    return True


class _Watchdog:
    """Interrupts this process when one phase of a test runs past :data:`TIMEOUT`.

    SIGINT is the signal Ray's blocking calls (``ray.get``, ``ray.wait``) give way to;
    the phase's hook wrapper turns that KeyboardInterrupt into this test's failure, so
    the session goes on.
    """

    def __init__(self) -> None:
        self.fired = False
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        self.fired = False
        self._timer = threading.Timer(TIMEOUT, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _fire(self) -> None:
        self.fired = True
        os.kill(os.getpid(), signal.SIGINT)  # this pytest process only


_watchdog = _Watchdog()


def _bounded() -> Generator[None, Any, Any]:
    _watchdog.arm()
    try:
        return (yield)
    except KeyboardInterrupt:
        if _watchdog.fired:
            pytest.fail(f"timed out: over {TIMEOUT:.0f} s (harness limit)", pytrace=False)
        raise
    finally:
        _watchdog.disarm()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _bounded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _bounded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, Any, Any]:
    return (yield from _bounded())
