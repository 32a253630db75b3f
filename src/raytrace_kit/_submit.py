"""Driver side: the debuggable proxies, their ``.remote``/``.options``/``.with_debug``.

A proxy wraps the Ray object the user decorated (``__wrapped__``) and submits through an
*instrumented variant* of it: a Ray remote function or actor class built from the same
Python code with the instrumentation of :mod:`raytrace_kit._execute` baked in. Variants
are built lazily, once per distinct :class:`~raytrace_kit._options.DebugOptions`, and
shared by every proxy derived from the same decorated object, so ``.remote()`` costs one
extra Python call over plain Ray.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import ray
from typing_extensions import ParamSpec, Self

from raytrace_kit import _identity, _local, _pin, _profiling
from raytrace_kit import _options as _options_module
from raytrace_kit._execute import CallSpec, instrument_class, instrument_function, qualified_name
from raytrace_kit._options import DebugOptions
from raytrace_kit._serialization import (
    SerializationFailure,
    SerializationReport,
    check_serializable,
    reject,
)
from raytrace_kit.exceptions import InvalidOptionError, NotSerializableError

if TYPE_CHECKING:
    from ray.actor import ActorClass, ActorHandle
    from ray.remote_function import RemoteFunction

__all__ = ["DebuggableActorClass", "DebuggableFunction"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


# How long a pinned node found alive is trusted before ray.nodes() is asked again.
_NODE_CHECK_SECONDS = 1.0


def _make_remote(target: Any, ray_options: dict[str, Any], options: DebugOptions) -> Any:
    if options.post_mortem:
        ray_options = _with_post_mortem(ray_options)
    if options.pin is not None and options.pin.node_id is not None:
        ray_options = {
            **ray_options,
            "scheduling_strategy": _pin.node_affinity(options.pin.node_id),
        }
    # ray.remote() with no options must be applied bare; it validates what it is given.
    return ray.remote(**ray_options)(target) if ray_options else ray.remote(target)


def _with_post_mortem(ray_options: dict[str, Any]) -> dict[str, Any]:
    """Ray options whose runtime_env turns on Ray's post-mortem debugger.

    Merged into the user's runtime_env (their own env_vars kept), for this function or
    actor class only; every other task keeps the job's environment.
    """
    runtime_env = dict(ray_options.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    env_vars["RAY_DEBUG_POST_MORTEM"] = "1"
    runtime_env["env_vars"] = env_vars
    return {**ray_options, "runtime_env": runtime_env}


class _Debuggable:
    """Shared machinery of the two proxies: identity, options, variants, pickling.

    Attribute lookups the proxy does not answer fall through to ``__wrapped__``, the
    object ``@debuggable`` was given, as they would on a ``functools.wraps`` wrapper.
    """

    def __init__(
        self,
        wrapped: Any,
        python_object: Any,
        options: DebugOptions,
        ray_options: dict[str, Any] | None = None,
        shared: _Shared | None = None,
    ) -> None:
        self.__wrapped__ = wrapped
        # The user's names and docs, not those of Ray's wrapper (RemoteFunction has no
        # __name__ at all). Instance attributes win over the class's own __doc__.
        self.__name__: str = python_object.__name__
        self.__qualname__: str = python_object.__qualname__
        self.__module__: str = python_object.__module__
        self.__doc__: str | None = python_object.__doc__
        self._python = python_object
        self._options = options
        self._ray_options = dict(ray_options or {})
        self._shared = shared if shared is not None else _Shared()
        self._remote_target: Any = None
        self._local_info: Any = None
        self._pinned_target: tuple[Any, Any, int] | None = None
        if options.local:
            # Install the ray.get/ray.wait hooks now: in `ray.get(f.remote())` Python looks
            # up ray.get before f.remote() runs.
            _local.activate()

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found on the proxy itself.
        if name.startswith("__") or "__wrapped__" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["__wrapped__"], name)

    @property
    def debug_options(self) -> DebugOptions:
        """The raytrace_kit options this object submits with."""
        return self._options

    # --- variants and targets ---

    def _build_variant(self) -> Any:
        raise NotImplementedError

    def _variant(self) -> Any:
        variants = self._shared.variants
        variant = variants.get(self._options)
        if variant is None:
            variant = self._build_variant()
            # setdefault: two threads building at once agree on one variant.
            variant = variants.setdefault(self._options, variant)
        return variant

    def _target(self) -> Any:
        target = self._remote_target
        if target is None:
            variant = self._variant()
            ray_options = self._ray_options
            if self._options.post_mortem and "runtime_env" in ray_options:
                # A runtime_env given here replaces the variant's: merge ours in again.
                ray_options = _with_post_mortem(ray_options)
            target = variant.options(**ray_options) if ray_options else variant
            self._remote_target = target
        return target

    def _derive(self, options: DebugOptions, ray_options: dict[str, Any]) -> Self:
        return type(self)(
            self.__wrapped__,
            self._python,
            options,
            ray_options,
            self._shared,
        )

    def options(self, **ray_options: Any) -> Self:
        """Return a copy that submits with these Ray options (as ``.options()`` in Ray).

        Ray validates the options here, so a bad option fails at this line.
        """
        merged = {**self._ray_options, **ray_options}
        derived = self._derive(self._options, merged)
        derived._target()
        return derived

    def with_debug(self, **kit_options: Any) -> Self:
        """Return a copy with changed raytrace_kit options, e.g. ``f.with_debug(log=False)``.

        Raises:
            InvalidOptionError: An unknown option or a value of the wrong type.
        """
        return self._derive(self._options.replace(**kit_options), self._ray_options)

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        """Build a Ray DAG node from the instrumented function or class."""
        return self._target().bind(*args, **kwargs)

    # --- pickling: a proxy captured by a task's closure, or passed as an argument ---

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (
            _rebuild,
            (
                type(self),
                self.__wrapped__,
                self._python,
                self._options,
                self._ray_options,
            ),
        )

    # --- submission: checks, then local mode or Ray ---

    def _submit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Check (per ``check``), then run locally or submit to Ray: ``.remote()``'s body."""
        options = self._options
        check = options.check
        if check == "always" or (check == "first" and not self._shared.checked):
            self._check_before_submit(args, kwargs)
        try:
            if _local.maybe_active or options.local:
                config = _local.config_for(options)
                if config is not None:
                    # A profile block on this process already covers local calls.
                    return self._run_locally(config, args, kwargs)
            pin = options.pin
            if pin is not None:
                if pin.node_id is not None:
                    self._check_node(pin.node_id)
                if pin.process:
                    return self._call_pinned(args, kwargs)
            block = _profiling.BLOCK.get()
            if block is not None and options.profile is None:
                # Submitted inside profile_memory()/profile_cpu(): profile it in the worker.
                in_block = dataclasses.replace(options, profile=block.kind, profile_block=block.id)
                return self._derive(in_block, self._ray_options)._target().remote(*args, **kwargs)
            target = self._remote_target
            if target is None:
                target = self._target()
            return target.remote(*args, **kwargs)
        except Exception as exc:
            # Pickling failures come as TypeError, PicklingError, NotImplementedError...:
            # explain any of them; anything else is re-raised untouched by _explain.
            if check == "off" or isinstance(exc, NotSerializableError):
                raise
            explained = self._explain(exc, args, kwargs)
            if explained is None:
                raise
            raise explained from exc

    def _run_locally(
        self, config: _local.LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        raise NotImplementedError

    def _check_node(self, node_id: str) -> None:
        """A pinned node must be alive: asked of Ray at most once a second per node."""
        key = (_identity.process_identity(), node_id)
        now = time.monotonic()
        checked = self._shared.nodes_checked
        if now - checked.get(key, -_NODE_CHECK_SECONDS) >= _NODE_CHECK_SECONDS:
            _pin.check_node(node_id)
            checked[key] = now

    def _task_options(self) -> dict[str, Any]:
        """The Ray options calls are submitted with: the decorated object's, then .options()."""
        return {**self.__wrapped__._default_options, **self._ray_options}

    # --- serializability checks (see _serialization.py) ---

    def _check_before_submit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``check="first"``: the code, once; ``"always"``: the code once, then arguments.

        Raises:
            NotSerializableError: Something Ray could not serialize; nothing was submitted.
        """
        shared = self._shared
        if not shared.checked:
            report = check_serializable(self._python, name=self.__qualname__)
            if not report.ok:
                reject(report, f"{self._kind} {self.__qualname__}", self.__qualname__)
            shared.checked = True  # verdicts "ok" are cached; failures are checked again
        if self._options.check == "always":
            arguments = self._check_arguments(args, kwargs)
            if arguments is not None:
                reject(arguments, f"a call of {self.__qualname__}", self.__qualname__)

    def _check_arguments(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], error: str = ""
    ) -> SerializationReport | None:
        failures: list[SerializationFailure] = []
        shared = self._shared
        if shared.signature is None:
            # That of a class is its constructor's, without self.
            shared.signature = inspect.signature(self._python)
        for name, value in _named_arguments(shared.signature, args, kwargs):
            report = check_serializable(value, name=name, scope="argument")
            failures.extend(report.failures)
        if not failures:
            return None
        return SerializationReport(
            f"the arguments of {self.__qualname__}",
            ok=False,
            failures=tuple(failures),
            error=error or failures[0].error,
        )

    def _explain(
        self, exc: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> NotSerializableError | None:
        """After Ray failed to serialize something at submission: what, and how to fix it."""
        report: SerializationReport | None = check_serializable(
            self._python, name=self.__qualname__
        )
        if report is not None and report.ok:
            report = self._check_arguments(args, kwargs)
        if report is None:
            return None  # not a serialization problem: Ray's error stands
        context = f"submitting {self.__qualname__}"
        try:
            reject(report, context, self.__qualname__)
        except NotSerializableError as error:
            return error

    _kind = "function"

    def __copy__(self) -> Self:
        return self._derive(self._options, self._ray_options)

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self.__copy__()

    def __repr__(self) -> str:
        kind = self._kind
        return f"<debuggable {kind} {self.__module__}.{self.__qualname__} {self._options}>"


class _Shared:
    """State shared by every proxy derived from one decorated object."""

    __slots__ = (
        "checked",
        "lock",
        "nodes_checked",
        "runner",
        "runner_specs",
        "signature",
        "variants",
    )

    def __init__(self) -> None:
        # DebugOptions -> the instrumented Ray remote function or actor class built for them.
        self.variants: dict[DebugOptions, Any] = {}
        # The code passed check_serializable() (check="first"/"always").
        self.checked = False
        # inspect.signature() of the user's code, to name arguments (check="always").
        self.signature: inspect.Signature | None = None
        # pin=True: (the Ray connection it belongs to, the runner actor's handle), and the
        # key under which each DebugOptions' spec was registered with that runner.
        self.runner: tuple[object, Any] | None = None
        self.runner_specs: dict[DebugOptions, int] = {}
        # pin=<node>: when each node was last found alive, per Ray connection.
        self.nodes_checked: dict[tuple[object, str], float] = {}
        self.lock = threading.Lock()


def _named_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, Any]]:
    """Arguments with their parameter names (``args[i]`` when they cannot be bound)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
    named: list[tuple[str, Any]] = []
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.extend(value.items())
        else:
            named.append((name, value))
    return named


def _rebuild(
    cls: type[_Debuggable],
    wrapped: Any,
    python_object: Any,
    options: DebugOptions,
    ray_options: dict[str, Any],
) -> _Debuggable:
    return cls(wrapped, python_object, options, ray_options)


class DebuggableFunction(_Debuggable, Generic[_P, _R]):
    """A Ray remote function whose every execution is instrumented in its worker.

    It behaves like the ``RemoteFunction`` it wraps: ``.remote(...)`` returns exactly what
    Ray returns, ``.options(...)`` takes Ray's options, other attributes fall through to
    the wrapped object (``__wrapped__``). ``.with_debug(...)`` changes raytrace_kit's
    options for the calls made through the copy it returns.
    """

    def remote(self, *args: _P.args, **kwargs: _P.kwargs) -> Any:
        """Submit the task; returns an ``ObjectRef``, a list of them, or a generator.

        In local mode the call runs here and now, and the refs hold its outcome.
        """
        return self._submit(args, kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._options.profile_scope == "actor":
            msg = (
                f"profile_scope='actor' applies to actor classes, and {self.__qualname__} is a "
                "function: use profile_scope='call' (one capture per call), or decorate the "
                "actor class that holds the state you are watching."
            )
            raise InvalidOptionError(msg, "profile_scope")

    def _run_locally(
        self, config: _local.LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return _local.submit_task(self, config, args, kwargs)

    # --- pin=True: one dedicated process ---

    def _runner(self) -> Any:
        """The pinned function's actor, created on first use for this Ray connection."""
        identity = _identity.process_identity()
        shared = self._shared
        cached = shared.runner
        if cached is not None and cached[0] is identity:
            return cached[1]  # the common case, without the lock
        with shared.lock:
            cached = shared.runner
            if cached is not None and cached[0] is identity:
                return cached[1]
            pin = self._options.pin or _options_module.Pin()
            options = _pin.runner_options(self._task_options(), pin)
            runner_class = ray.remote(**options)(_pin.PinnedRunner)
            handle = runner_class.remote(self._python)
            shared.runner = (identity, handle)
            shared.runner_specs = {}
            return handle

    def _runner_spec_key(self, runner: Any) -> int:
        """The key of this proxy's spec on the runner, registering it on first use."""
        shared = self._shared
        key = shared.runner_specs.get(self._options)
        if key is None:
            with shared.lock:
                key = shared.runner_specs.get(self._options)
                if key is None:
                    key = len(shared.runner_specs)
                    # Same actor, default group: registered before the calls that use it.
                    runner.register.remote(key, self._local_call_info()[0])
                    shared.runner_specs[self._options] = key
        return key

    def _call_pinned(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        runner = self._runner()
        cached = self._pinned_target
        if cached is None or cached[0] is not runner:
            # Once per proxy and runner: the method, its per-call options, the spec key.
            generator = inspect.isgeneratorfunction(self._python)
            method = runner.call_generator if generator else runner.call
            per_call = _pin.call_options(self._task_options(), generator)
            if per_call:
                method = method.options(**per_call)
            cached = self._pinned_target = (runner, method, self._runner_spec_key(runner))
        return cached[1].remote(cached[2], *args, **kwargs)

    def pinned_worker(self) -> _pin.PinnedWorker:
        """Where this pinned function's process lives (starting it if needed).

        Returns:
            Node id and IP, pid, worker id and actor id: what py-spy, debugpy or an IDE
            needs to attach.

        Raises:
            InvalidOptionError: The function is not pinned with ``pin=True``.
        """
        self._require_process_pin("pinned_worker")
        return ray.get(self._runner().where.remote())  # type: ignore[no-any-return]

    def unpin(self) -> None:
        """End the pinned process; the next call starts a new one."""
        shared = self._shared
        with shared.lock:
            cached, shared.runner = shared.runner, None
        if cached is not None and cached[0] is _identity.process_identity():
            ray.kill(cached[1])

    def stacks(self, timeout: float = 30) -> _pin.ProcessStacks:
        """The Python stack of every thread of the pinned process, even while it is busy.

        Raises:
            InvalidOptionError: The function is not pinned with ``pin=True``.
        """
        self._require_process_pin("stacks")
        return _pin.stacks(self._runner(), timeout=timeout)

    def _require_process_pin(self, what: str) -> None:
        if self._options.pin is None or not self._options.pin.process:
            msg = (
                f"{self.__qualname__}.{what}() needs a pinned function: decorate it with "
                f"@debuggable(pin=True), or use {self.__qualname__}.with_debug(pin=True)."
            )
            raise InvalidOptionError(msg, "pin")

    def _build_variant(self) -> RemoteFunction:
        function = instrument_function(self._python, self._options)
        return _make_remote(function, dict(self.__wrapped__._default_options), self._options)

    def _local_call_info(self) -> tuple[CallSpec, Any, bool]:
        """What local mode needs: the spec, the effective ``num_returns``, generator-ness."""
        info = self._local_info
        if info is None:
            spec = CallSpec(qualified_name(self._python), "task", self._options)
            merged = self._task_options()
            generator = inspect.isgeneratorfunction(self._python)
            info = self._local_info = (spec, merged.get("num_returns"), generator)
        return info  # type: ignore[no-any-return]

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._python)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = (
            f"debuggable remote function {self.__qualname__!r} cannot be called directly; "
            f"use {self.__qualname__}.remote(...) and ray.get() the result."
        )
        raise TypeError(msg)


class DebuggableActorClass(_Debuggable, Generic[_T]):
    """A Ray actor class whose ``__init__`` and every method call are instrumented.

    ``.remote(...)`` returns a real ``ActorHandle``; handles fetched later with
    ``ray.get_actor(name)`` are instrumented too, since the instrumentation lives in the
    class the actor process runs.
    """

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle[_T]:
        """Create the actor; returns its ``ActorHandle``.

        In local mode the actor is built in this process and a ``LocalActorHandle`` is
        returned, used the same way.
        """
        return self._submit(args, kwargs)

    _kind = "actor class"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pin = self._options.pin
        if pin is not None and pin.process:
            msg = (
                f"pin=True does not apply to actor class {self.__qualname__}: an actor already "
                "runs all its calls in one process. To choose its node, pin=<node id>."
            )
            raise InvalidOptionError(msg, "pin")

    def _run_locally(
        self, config: _local.LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return _local.create_actor(self, config, args, kwargs)

    def _build_variant(self) -> ActorClass[_T]:
        cls = instrument_class(self._python, self._options)
        _pin.add_stacks_support(cls)
        ray_options = _pin.with_debug_group(dict(self.__wrapped__._default_options))
        return _make_remote(cls, ray_options, self._options)

    def _local_actor_info(self) -> tuple[type, DebugOptions, dict[str, Any]]:
        """What local mode needs: the user's class, kit options and Ray options."""
        return self._python, self._options, self._task_options()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = (
            f"debuggable actor class {self.__qualname__!r} cannot be instantiated "
            f"directly; use {self.__qualname__}.remote(...) to create the actor."
        )
        raise TypeError(msg)


def python_function_of(remote_function: Any) -> Callable[..., Any]:
    """The Python function a ``RemoteFunction`` was made from."""
    return remote_function._function  # type: ignore[no-any-return]


def python_class_of(actor_class: Any) -> type:
    """The user's class an ``ActorClass`` was made from."""
    return actor_class.__ray_metadata__.modified_class.__ray_actor_class__  # type: ignore[no-any-return]
