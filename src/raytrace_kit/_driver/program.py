"""``instrument()``: every remote function and actor class of the user's code made debuggable.

Nothing is rewritten at decoration: the objects stay Ray's own (``isinstance`` checks,
``.options()``, pickling all as plain Ray). What changes is submission. ``RemoteFunction``
and ``ActorClass`` submit through ``_remote``; the hook there sends a call of an object made
from the user's code through a :class:`DebuggableFunction` or :class:`DebuggableActorClass`
built for that object once, with the effective Ray options of the call. So objects made
before ``instrument()``, kept in lists, made by ``.options()`` or rebuilt by a DAG are all
covered, and objects the user decorated already keep their own options (the kit's own
remotes pass straight through). Each call carries a :class:`~raytrace_kit._options.Program`,
and the worker that runs it installs the same hook before the user's code runs, so what
the call submits is instrumented too.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from typing_extensions import Unpack

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._driver import data_hooks, record
from raytrace_kit._options import DebugOptions, KitOptions, Program
from raytrace_kit._output import writer
from raytrace_kit._worker import sampler
from raytrace_kit.exceptions import InvalidOptionError

__all__ = ["ENV_INSTRUMENT", "install", "instrument", "is_instrumented", "options_from_env"]

ENV_INSTRUMENT = "RAYTRACE_KIT_INSTRUMENT"

_TASK_KEY = "remote_function.RemoteFunction._remote#program"
_ACTOR_KEY = "actor.ActorClass._remote#program"
# Never instrumented, whatever the patterns say: the kit itself (it would call itself).
_NEVER = ("raytrace_kit", "raytrace_kit.*")
# The libraries Ray ships: not the user's code, though they live beside it in site-packages.
_RAY_OWN = ("ray", "ray.*")


class _State:
    """What instrument() set up in this process; a reset forgets it (the patches go too)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.lock = threading.Lock()
        self.options: DebugOptions | None = None  # the options of what is instrumented
        # Each Ray object seen at submission -> its proxy, or None (not the user's code).
        self.proxies: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.selected: dict[str, bool] = {}  # module name -> instrumented


state = _State()
_registry.register(state.clear, state.clear, layer=_registry.LOCAL)


def instrument(
    *,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    driver: bool = True,
    **options: Unpack[KitOptions],
) -> None:
    """Make every Ray remote function and actor class of your code debuggable, unedited.

    Call it first thing, in a script or a notebook (``raytrace-kit run app.py`` calls it
    for you). From then on, each call of a ``@ray.remote`` function or actor class
    defined in your code, in this process and in the workers its calls run in, is
    instrumented exactly as if it had been decorated with ``@debuggable(**options)``:
    the same events, the same fidelity. Objects made before this call are covered too:
    the kit steps in when a call is submitted, not when the object is made. Objects you
    decorated yourself keep their own options.

    "Your code" is every module that is not in the standard library, not installed in
    site-packages (third-party packages) and not Ray's own libraries: ``__main__``, a
    notebook, your package checked out (installed editable or not). ``include`` and
    ``exclude`` change that.

    With ``driver=True`` (the default) this process also keeps its own record
    (``driver-*.jsonl`` in the session's log dir): the run, and each ``ray.get`` and
    ``ray.wait`` your code makes here, with how long it blocked and on which calls. The
    report reads it: a ``ray.get`` in a loop, the straggler the driver waited on. With
    ``sample=`` too, this process's threads are sampled as its workers' are (their
    samples name the driver's script).

    Calling it again replaces the settings (a notebook cell run twice).

    Args:
        include: Module name patterns (``fnmatch``: ``"mylib.*"``) instrumented even if
            installed in site-packages, or part of Ray's libraries.
        exclude: Module name patterns never instrumented (they win over ``include``).
        driver: Keep the driver's own record of its ``ray.get``/``ray.wait`` calls.
        **options: The options of :func:`debuggable` (``log_args``, ``profile``,
            ``check``...), for every call instrumented.

    Raises:
        InvalidOptionError: An unknown option, a value of the wrong type, or a pattern
            that is not a string.

    Example:
        >>> import raytrace_kit
        >>> raytrace_kit.instrument(log_args=True)  # doctest: +SKIP
    """
    kit = DebugOptions().replace(**options)
    if kit.pin is not None:
        msg = (
            "instrument(pin=...) would pin every function of the program; pin the one you "
            "are debugging instead: debuggable(f, pin=True), or f.with_debug(pin=True)"
        )
        raise InvalidOptionError(msg, "pin")
    program = Program(install, _patterns(include, "include"), _patterns(exclude, "exclude"))
    install(dataclasses.replace(kit, program=program))
    if driver and not _ray_compat.is_worker_process():
        from raytrace_kit._driver import store_watch  # noqa: PLC0415 -- the driver's only

        record.start(functools.partial(selected, program=program), log_args=kit.log_args)
        store_watch.start()  # a store.held record when the driver's refs hold the store
        if kit.sample is not None:  # the driver's own threads, as its workers' are
            sampler.start_driver(kit.sample, sys.argv[0] if sys.argv else "?")


def _patterns(given: Iterable[str], name: str) -> tuple[str, ...]:
    patterns = (given,) if isinstance(given, str) else tuple(given)
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            msg = f"{name}={given!r}: expected module name patterns, such as 'mypackage.*'"
            raise InvalidOptionError(msg, name)
    return patterns


def install(options: DebugOptions) -> None:
    """Hook submissions in this process: what :func:`instrument` and each worker run.

    ``options`` are those of what is instrumented, their ``program`` set. A worker runs it
    (through ``Program.install``) at its first instrumented call, before the user's code.
    It only patches: the proxies (and what they import: local mode, checks, the report
    readers of profile blocks) load at the first call of the user's that goes through one,
    so a worker that submits nothing, a Ray Data actor for one, never imports them.
    """
    with state.lock:
        state.options = options
        state.proxies = weakref.WeakKeyDictionary()
        state.selected = {}
        for key in (_TASK_KEY, _ACTOR_KEY):
            if not _ray_compat.patched(key):
                owner, attribute = _ray_compat.attribute_owner(key)
                _ray_compat.patch(key, owner, attribute, _hooked(getattr(owner, attribute)))
        if not _ray_compat.TAKEN:
            _ray_compat.TAKEN.append(_taken)
    data_hooks.install(_data_options)  # Ray Data's UDFs: now, or when ray.data is imported


def _data_options(udf: Any) -> DebugOptions | None:
    """The options of a Ray Data UDF of the user's code, or ``None`` for another's."""
    options = state.options
    if options is None or options.program is None:
        return None
    module = getattr(getattr(udf, "func", udf), "__module__", None)  # a partial: its function
    return options if selected(module, options.program) else None


def _taken(remote: Any) -> bool:
    return not _ray_compat.is_kit_remote(remote) and _proxy_for(remote) is not None


def is_instrumented() -> bool:
    """Whether :func:`instrument` is in force in this process."""
    return state.options is not None


def options_from_env(value: str) -> dict[str, Any]:
    """``RAYTRACE_KIT_INSTRUMENT``'s value as instrument()'s keywords.

    ``1`` (or ``true``, ``yes``) for the defaults, else comma-separated settings:
    ``log_args,profile=cprofile,include=mylib.*``. ``include``/``exclude`` may repeat.

    Raises:
        InvalidOptionError: A setting that is not one of instrument()'s.
    """
    keywords: dict[str, Any] = {}
    if value.strip().lower() in {"1", "true", "yes", "on"}:
        return keywords
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, has_value, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if name in {"include", "exclude"}:
            keywords.setdefault(name, []).append(text)
            continue
        keywords[name] = _parse_value(text) if has_value else True
    return keywords


def _parse_value(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in {"true", "yes", "on", "1"}:
        return True
    if lowered in {"false", "no", "off", "0"}:
        return False
    if lowered in {"none", ""}:
        return None
    return text.strip()


# --- the hooks: Ray's _remote, sending the user's calls through a proxy ---


def _hooked(original: Callable[..., Any]) -> Callable[..., Any]:
    """Ray's ``_remote``, sending calls of the user's objects through their proxy.

    ``RemoteFunction._remote`` and ``ActorClass._remote`` take the same arguments: the
    call's, and its effective Ray options.
    """

    @functools.wraps(original)
    def _remote(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        if _ray_compat.is_kit_remote(self):  # the kit's own (a proxy's): Ray's, untouched
            record.submitted()
            return original(self, args, kwargs, **options)
        proxy = _proxy_for(self)
        if proxy is None:
            record.submitted()
            return original(self, args, kwargs, **options)
        return _with_options(proxy, self, options).remote(*(args or ()), **(kwargs or {}))

    return _remote


def _proxy_for(remote: Any) -> Any:
    """The proxy that submits ``remote``'s calls, or ``None`` when it is not the user's."""
    try:
        return state.proxies[remote]
    except KeyError:
        pass
    except TypeError:  # not weakly referable: no cache, decided each time
        return _make_proxy(remote)
    proxy = _make_proxy(remote)
    state.proxies[remote] = proxy
    return proxy


def _make_proxy(remote: Any) -> Any:
    options = state.options
    if options is None or options.program is None:
        return None
    # Imported at the first proxy made, not with this module: a worker unpickles this
    # module with every call instrument() covers (Program.install), and the proxies'
    # imports cost it 60 to 80 ms (benchmarks/ray_data.py: a new actor per pool).
    from raytrace_kit._driver.actor_class import DebuggableActorClass  # noqa: PLC0415
    from raytrace_kit._driver.function import DebuggableFunction  # noqa: PLC0415

    try:
        if isinstance(remote, _ray_compat.ActorClass):
            cls = _ray_compat.python_class_of(remote)
            if not selected(cls.__module__, options.program):
                return None
            return DebuggableActorClass(remote, cls, options)
        function = _ray_compat.python_function_of(remote)
        if not selected(getattr(function, "__module__", None), options.program):
            return None
        return DebuggableFunction(remote, function, options)
    except Exception as exc:  # the call goes to Ray as it is, never broken by the kit
        writer.report_failure(
            f"instrument:{_ray_compat.remote_name(remote)}",
            f"cannot instrument {_ray_compat.remote_name(remote)}; its calls go to Ray as they are",
            exc,
        )
        return None


# Options Ray takes at declaration only (``@ray.remote(max_calls=...)``), not in .options().
_DECLARED_ONLY = frozenset({"max_calls", "serialized_runtime_env_info"})


def _with_options(proxy: Any, remote: Any, options: dict[str, Any]) -> Any:
    """``proxy``, or a copy with the call's Ray options where they are not the declared ones.

    ``remote.remote()`` passes the declared options, ``remote.options(...).remote()`` the
    merged ones; ``.options`` of the proxy takes what Ray's own ``.options`` took.
    """
    declared = _ray_compat.default_options_of(remote)
    given = {k: v for k, v in options.items() if k not in _DECLARED_ONLY}
    if given == {k: v for k, v in declared.items() if k not in _DECLARED_ONLY}:
        return proxy
    return proxy.options(**given)


# --- which modules are the user's code ---


def selected(module: str | None, program: Program) -> bool:
    """Whether objects defined in ``module`` are instrumented under ``program``."""
    if module is None:
        return True  # made at run time (exec, a notebook): the user's
    cache = state.selected
    found = cache.get(module)
    if found is None:
        found = cache[module] = _selected(module, program)
    return found


def _matches(module: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns)


def _selected(module: str, program: Program) -> bool:
    if _matches(module, _NEVER) or _matches(module, program.exclude):
        return False
    if _matches(module, program.include):
        return True
    return is_user_module(module)


def is_user_module(module: str) -> bool:
    """Whether ``module`` is the user's code: not stdlib, site-packages, nor Ray's libraries."""
    if _matches(module, _RAY_OWN):
        return False
    loaded = sys.modules.get(module)
    file = getattr(loaded, "__file__", None)
    if not file:
        return module not in sys.builtin_module_names  # __main__ of a notebook, exec'd code
    return not _installed(Path(file))


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where installed code lives: the standard library and every site-packages."""
    import site  # noqa: PLC0415 -- once, at the first module judged

    found = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    found.update(getattr(site, "getsitepackages", list)())
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if user_site:
        found.add(user_site)
    return tuple(os.path.realpath(d) + os.sep for d in found if d)


def _installed(file: Path) -> bool:
    path = os.path.realpath(file)
    parts = Path(path).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return path.startswith(_library_dirs())
