"""The machinery both debuggable proxies share: ``.remote``/``.options``/``.with_debug``/``.bind``.

A proxy wraps the Ray object the user decorated (``__wrapped__``) and submits through an
*instrumented variant* of it: a Ray remote function or actor class built from the same
Python code with the worker-side instrumentation baked in. Variants are built lazily, once
per distinct :class:`~raytrace_kit._options.DebugOptions`, and shared by every proxy
derived from the same decorated object, so ``.remote()`` costs one extra Python call over
plain Ray. The proxy is hand-written rather than a ``wrapt`` proxy: see docs/internals.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from typing import Any

from typing_extensions import Self

from raytrace_kit import _process, _ray_compat
from raytrace_kit._driver import checks, pinning
from raytrace_kit._driver.blocks import BLOCK
from raytrace_kit._html import card, table
from raytrace_kit._local import state as local_state
from raytrace_kit._local.arguments import arity
from raytrace_kit._local.hooks import activate as activate_local_mode
from raytrace_kit._local.setting import LocalConfig, config_for
from raytrace_kit._options import DebugOptions
from raytrace_kit._output import paths
from raytrace_kit._output import state as output_state
from raytrace_kit._output.context import PARENT_KWARG
from raytrace_kit._output.writer import report_failure
from raytrace_kit._serialization.report import reject
from raytrace_kit._worker import submitted
from raytrace_kit._worker.by_value import large_code
from raytrace_kit._worker.parents import with_parent
from raytrace_kit.exceptions import NotSerializableError

__all__ = ["Debuggable", "make_remote"]

# How long a pinned node found alive is trusted before ray.nodes() is asked again.
_NODE_CHECK_SECONDS = 1.0


def make_remote(target: Any, ray_options: dict[str, Any], options: DebugOptions) -> Any:
    if options.post_mortem:
        ray_options = _with_post_mortem(ray_options)
    if options.pin is not None and options.pin.node_id is not None:
        ray_options = {
            **ray_options,
            "scheduling_strategy": pinning.node_affinity(options.pin.node_id),
        }
    # ray.remote() with no options must be applied bare; it validates what it is given.
    remote = _ray_compat.ray_remote
    made = remote(**ray_options)(target) if ray_options else remote(target)
    return _ray_compat.mark_kit_remote(made)


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


class _Shared:
    """State shared by every proxy derived from one decorated object."""

    __slots__ = (
        "arity",
        "checked",
        "nodes_checked",
        "runner",
        "signature",
        "size_checked",
        "token",
        "variants",
    )

    def __init__(self, token: str | None = None) -> None:
        # Names this decorated object across processes (it travels when a proxy is pickled).
        self.token = token or os.urandom(8).hex()
        # DebugOptions -> the instrumented Ray remote function or actor class built for them.
        self.variants: dict[DebugOptions, Any] = {}
        # The code passed check_serializable() (check="first"/"always").
        self.checked = False
        # Local mode checked the pickled code's size once, as Ray does when it exports it.
        self.size_checked = False
        # inspect.signature() of the user's code, to name arguments (check="always").
        self.signature: inspect.Signature | None = None
        # Local mode: (fewest, most) positional arguments, when a call needs no binding.
        self.arity: tuple[int, int] | None = None  # set with signature
        # pin=True: the runner actor and the specs registered with it.
        self.runner = pinning.RunnerSlot(f"raytrace_kit-pinned-{self.token}")
        # pin=<node>: when each node was last found alive, per Ray connection.
        self.nodes_checked: dict[tuple[object, str], float] = {}


class Debuggable:
    """Shared machinery of the two proxies: identity, options, variants, submission, pickling.

    Attribute lookups the proxy does not answer fall through to ``__wrapped__``, the
    object ``@debuggable`` was given, as they would on a ``functools.wraps`` wrapper;
    ``dir()`` (tab completion) lists that object's names and the proxy's public ones.
    """

    _kind = "function"

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
        self._submit_prefix: str | None = None  # its call.submit records' fixed members
        if options.local:
            # Install the ray.get/ray.wait hooks now: in `ray.get(f.remote())` Python looks
            # up ray.get before f.remote() runs.
            activate_local_mode()

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found on the proxy itself.
        if name.startswith("__") or "__wrapped__" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["__wrapped__"], name)

    def __dir__(self) -> list[str]:
        # What tab completion lists (IPython, Jupyter): Ray's names for the wrapped object
        # (an actor class's methods among them), and the kit's public ones.
        if "__wrapped__" not in self.__dict__:  # its __init__ raised
            return list(super().__dir__())
        names = set(dir(self.__dict__["__wrapped__"]))
        names.update(name for name in dir(type(self)) if not name.startswith("_"))
        return sorted(names)

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
        return type(self)(self.__wrapped__, self._python, options, ray_options, self._shared)

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

    def _task_options(self) -> dict[str, Any]:
        """The Ray options calls are submitted with: the decorated object's, then .options()."""
        return {**_ray_compat.default_options_of(self.__wrapped__), **self._ray_options}

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
                self._shared.token,
            ),
        )

    def __copy__(self) -> Self:
        return self._derive(self._options, self._ray_options)

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self.__copy__()

    def _shown(self) -> tuple[str, str, str]:
        """Name, the kit's options that differ from the defaults, Ray's options: short."""
        name = f"{self.__module__}.{self.__qualname__}"
        defaults = DebugOptions()
        kit = ", ".join(
            f"{f.name}={getattr(self._options, f.name)!r}"
            for f in dataclasses.fields(self._options)
            if getattr(self._options, f.name) != getattr(defaults, f.name)
        )
        options = {
            **_ray_compat.default_options_of(self.__wrapped__),
            **self._ray_options,
        }
        ray_text = ", ".join(f"{k}={v!r}" for k, v in options.items())
        return name, kit or "defaults", ray_text or "defaults"

    def __repr__(self) -> str:
        if "_options" not in self.__dict__:  # its __init__ raised: a debugger may still show it
            return f"<debuggable {self._kind} (not built)>"
        name, kit, ray_text = self._shown()
        return f"<debuggable {self._kind} {name} (raytrace_kit: {kit}; ray: {ray_text})>"

    def _repr_html_(self) -> str:
        name, kit, ray_text = self._shown()
        rows = (("raytrace_kit options", kit), ("Ray options", ray_text))
        return card(f"debuggable {self._kind}", name, table(("", ""), rows))

    # --- submission: checks, then local mode or Ray ---

    def _submit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Check (per ``check``), then run locally or submit to Ray: ``.remote()``'s body."""
        options = self._options
        check = options.check
        shared = self._shared
        if check == "always" or (check == "first" and not shared.checked):
            try:
                self._check_before_submit(args, kwargs)
            except NotSerializableError as exc:  # its traceback: to .remote(), not the checks
                raise exc.with_traceback(None) from exc.__cause__
        try:
            if options.local or local_state.state.active:
                config = config_for(options)
                if config is not None:
                    return self._local_call(config, args, kwargs)
            kwargs = with_parent(kwargs)  # inside a call: which call submitted this one
            made = self._submit_to_ray(args, kwargs)
        except Exception as exc:
            # Pickling failures come as TypeError, PicklingError, NotImplementedError...:
            # explain any of them; anything else is re-raised untouched.
            if check == "off" or isinstance(exc, NotSerializableError):
                raise
            try:
                explained = checks.explain(
                    self._python, self._signature(), args, kwargs, self.__qualname__
                )
            except Exception:
                explained = None  # explaining failed: Ray's own error stands
            if explained is None:
                raise
            raise explained from exc
        if options.log:
            self._record(made, args, kwargs)
        return made

    def _submit_to_ray(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Submit to Ray: pinned, profiled in a block, or as it is."""
        options = self._options
        pin = options.pin
        if pin is not None and pin.node_id is not None:
            self._check_node(pin.node_id)
        if pin is not None and pin.process:
            return self._call_pinned(args, kwargs)
        block = BLOCK.get()
        if block is not None and options.profile is None and self._kind == "function":
            # Submitted inside profile_memory()/profile_cpu(): profile it in the worker.
            in_block = dataclasses.replace(options, profile=block.kind, profile_block=block.id)
            return self._derive(in_block, self._ray_options)._target().remote(*args, **kwargs)
        target = self._remote_target or self._target()
        if output_state.state.last_ray_log_dir is None:  # once: what report() reads later
            paths.remember_session()
        return target.remote(*args, **kwargs)

    def _record(self, made: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Keep the ``call.submit`` record of a call just submitted (see ``_worker.submitted``).

        Never raises: the call is submitted already, and its result is the user's.
        """
        try:
            prefix = self._submit_prefix
            if prefix is None:
                name = f"{self.__module__}.{self.__qualname__}"
                # By now Ray has pickled the function: its size, if large, in every record.
                code = large_code(tuple(self._shared.variants.values()))
                prefix = submitted.prefix(name, "task", self._task_options(), code_bytes=code)
                self._submit_prefix = prefix
            submitted.record(prefix, made, None, kwargs.get(PARENT_KWARG), args, kwargs)
        except Exception as exc:
            report_failure("submit-record", "cannot record a submission", exc)

    def _run_locally(
        self, config: LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        raise NotImplementedError

    def _local_call(
        self, config: LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        activate_local_mode()  # @debuggable(local=True) can be the first use
        if not self._shared.size_checked:
            self._check_size()
        return self._run_locally(config, args, kwargs)

    def _check_size(self) -> None:
        checks.check_code_size(self._python, self._kind)  # raises as Ray would
        self._shared.size_checked = True

    def _call_pinned(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _signature(self) -> inspect.Signature:
        shared = self._shared
        if shared.signature is None:
            # That of a class is its constructor's, without self.
            signature = inspect.signature(self._python)
            shared.arity = arity(signature)
            shared.signature = signature
        return shared.signature

    def _check_before_submit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``check="first"``: the code, once; ``"always"``: the code once, then arguments.

        Raises:
            NotSerializableError: Something Ray could not serialize; nothing was submitted.
        """
        shared = self._shared
        name = self.__qualname__
        if not shared.checked:
            checks.check_code(self._python, name, self._kind)
            shared.checked = True  # verdicts "ok" are cached; failures are checked again
        if self._options.check == "always":
            arguments = checks.check_arguments(self._signature(), args, kwargs, name)
            if arguments is not None:
                reject(arguments, f"a call of {name}", name)

    def _check_node(self, node_id: str) -> None:
        """A pinned node must be alive: asked of Ray at most once a second per node."""
        key = (_process.process_identity(), node_id)
        now = time.monotonic()
        checked = self._shared.nodes_checked
        if now - checked.get(key, -_NODE_CHECK_SECONDS) >= _NODE_CHECK_SECONDS:
            pinning.check_node(node_id)
            checked[key] = now


def _rebuild(  # noqa: PLR0917 -- pickle calls it with positional arguments
    cls: type[Debuggable],
    wrapped: Any,
    python_object: Any,
    options: DebugOptions,
    ray_options: dict[str, Any],
    token: str,
) -> Debuggable:
    return cls(wrapped, python_object, options, ray_options, _Shared(token))
