"""Ray Data's entry points, hooked: each UDF a user passes becomes recorded calls, checked first.

The methods that take a user's function or callable class (``Dataset.map_batches``, ``map``,
``flat_map``, ``filter``, ``add_column``, ``GroupedData.map_groups``) are wrapped with
wrapt, the way OpenTelemetry's instrumentations wrap the libraries they trace: a
post-import hook applies the wrappers when ``ray.data`` is first imported (it often is
after ``instrument()``), or at once if it already is; the kit's reset removes them.

A call of one of them, given a UDF of the user's code (under ``instrument()`` or
``raytrace-kit run``) or a UDF decorated with ``@debuggable``:

1. checks that Ray can serialize the UDF (and a class's constructor arguments, and the
   ``fn_args``), and raises :class:`~raytrace_kit.NotSerializableError` naming the
   captured variable, before Ray Data builds anything (``check="off"`` skips it);
2. hands Ray Data the UDF wrapped (``_worker/data_udf.py``), then names its calls after the
   operator Ray Data made for it (``MapBatches(clean)``);
3. writes a ``data.operator`` event: the operator, its inputs, the UDF, the line that
   called the method, tasks or actors.

Ray Data's own UDFs (it calls ``map_batches`` itself, with functions of its own) pass
through untouched, as does everything when nothing is instrumented.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import ray
import wrapt

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._options import CallSpec, DebugOptions, qualified_name
from raytrace_kit._output import writer
from raytrace_kit._ray_compat import data as data_compat
from raytrace_kit._serialization.report import reject
from raytrace_kit._serialization.walk import check_serializable
from raytrace_kit._worker import data_udf
from raytrace_kit._worker.data_class import data_class

__all__ = ["install"]

# (module, attribute path, where the UDF is: positional index and keyword, per row or batch)
_ENTRY_POINTS = (
    ("ray.data.dataset", "Dataset.map_batches", 0, "fn", False),
    ("ray.data.dataset", "Dataset.map", 0, "fn", True),
    ("ray.data.dataset", "Dataset.flat_map", 0, "fn", True),
    ("ray.data.dataset", "Dataset.filter", 0, "fn", True),
    ("ray.data.dataset", "Dataset.add_column", 1, "fn", False),
    ("ray.data.grouped_data", "GroupedData.map_groups", 0, "fn", False),
)


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hooked = False  # the post-import hook registered (once per process)
        # Options for a plain UDF of the user's code (instrument()), or None for none.
        self.options_for: Callable[[Any], DebugOptions | None] | None = None


state = _State()


def _forget() -> None:
    state.options_for = None


_registry.register(_forget, layer=_registry.LOCAL)


def install(options_for: Callable[[Any], DebugOptions | None] | None = None) -> None:
    """Hook Ray Data's entry points now, or when ``ray.data`` is first imported.

    ``options_for`` (from ``instrument()``) gives the options of a plain UDF, or ``None``
    when it is not the user's; without it only ``@debuggable`` UDFs are instrumented.
    """
    with state.lock:
        if options_for is not None:
            state.options_for = options_for
        if state.hooked and (
            "ray.data" not in sys.modules or _ray_compat.patched(_key(*_ENTRY_POINTS[0][:2]))
        ):
            return
        state.hooked = True
    wrapt.register_post_import_hook(_apply, "ray.data")


def _key(module: str, path: str) -> str:
    return f"data:{module}.{path}"


def _apply(_module: Any) -> None:
    """Wrap each entry point (``ray.data`` just imported); never raises."""
    for module_name, path, position, keyword, rows in _ENTRY_POINTS:
        key = _key(module_name, path)
        if _ray_compat.patched(key):
            continue
        try:
            module = sys.modules.get(module_name) or __import__(module_name, fromlist=["_"])
            owner_name, attribute = path.split(".")
            owner = getattr(module, owner_name)
            original = owner.__dict__[attribute]
            hook = _entry_hook(position, keyword, rows=rows)
            _ray_compat.patch(key, owner, attribute, wrapt.FunctionWrapper(original, hook))
        except Exception as exc:  # another Ray Data: its pipelines run uninstrumented
            writer.report_failure(key, f"cannot instrument Ray Data's {path}", exc)


def _entry_hook(position: int, keyword: str, *, rows: bool) -> Callable[..., Any]:
    def hook(wrapped: Any, _instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        given_by_name = keyword in kwargs
        udf = kwargs[keyword] if given_by_name else args[position] if len(args) > position else None
        taken = _take(udf, wrapped.__name__, kwargs, rows=rows)
        if taken is None:
            return _as_users(wrapped, args, kwargs)
        replacement, finish = taken
        if given_by_name:
            kwargs = {**kwargs, keyword: replacement}
        else:
            args = (*args[:position], replacement, *args[position + 1 :])
        dataset = _as_users(wrapped, args, kwargs)
        finish(dataset)
        return dataset

    return hook


def _as_users(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``wrapped(*args, **kwargs)``, its warnings shown at the user's line, as without the kit.

    Ray Data points a warning (``ray_remote_args`` is deprecated...) at the first frame
    outside its own module, which under the kit is the hook's: each warning that names
    this file is held, then issued again at the user's line, through the user's filters
    (an ``error`` filter raises it there). Other warnings pass as they are.
    """
    held: list[tuple[Warning | str, type[Warning]]] = []
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("always", module=re.escape(__name__) + "$")
            show = warnings.showwarning

            def hold(message: Any, category: Any, filename: str, *rest: Any, **more: Any) -> None:
                if filename == __file__:
                    held.append((message, category))
                else:
                    show(message, category, filename, *rest, **more)

            warnings.showwarning = hold
            return wrapped(*args, **kwargs)
    finally:
        if held:
            _warn_at_user(held)


def _warn_at_user(held: list[tuple[Warning | str, type[Warning]]]) -> None:
    frame = _user_frame(sys._getframe(1))
    for message, category in held:
        if frame is None:
            warnings.warn(message, category, stacklevel=1)
            continue
        scope = frame.f_globals
        warnings.warn_explicit(
            message,
            category,
            frame.f_code.co_filename,
            frame.f_lineno,
            module=scope.get("__name__"),
            registry=scope.setdefault("__warningregistry__", {}),
            module_globals=scope,
        )


def _take(
    udf: Any, method: str, kwargs: dict[str, Any], *, rows: bool
) -> tuple[Any, Callable[[Any], None]] | None:
    """The UDF to give Ray Data instead of ``udf``, and what to do with the dataset made."""
    if udf is None or not callable(udf) or getattr(udf, data_udf.MARK, None) is not None:
        # An expression (filter(expr=...)), no UDF at all (Ray Data raises its own
        # ValueError for add_column("id", 0)), or the kit's already.
        return None
    target, options = _unwrapped(udf)
    if options is None or not options.log:
        return None if target is udf else (target, lambda _dataset: None)
    name = _name_of(target)
    if options.check != "off":
        _check(target, name, method, kwargs)
    specs = data_udf.Specs(name)
    if isinstance(target, type):
        replacement: Any = data_class(target, specs, rows=rows)
    else:
        replacement = (data_udf.row_function if rows else data_udf.batch_function)(target, specs)
    site = _call_site()

    def finish(dataset: Any) -> None:
        operator, inputs = data_compat.operator_of(dataset)
        is_class = isinstance(target, type)
        specs.init = CallSpec(f"{name}.__init__", "actor_init", options, operator)
        specs.call = CallSpec(
            f"{name}.__call__" if is_class else name,
            "actor_method" if is_class else "task",
            options,
            operator,
        )
        fields: dict[str, Any] = {"operator": operator, "inputs": list(inputs), "function": name}
        fields.update(method=method, compute="actors" if is_class else "tasks", per_row=rows)
        fields.update(batch_size=_batch_size(kwargs.get("batch_size")), site=site)
        writer.emit("data.operator", "info", fields)

    return replacement, finish


def _unwrapped(udf: Any) -> tuple[Any, DebugOptions | None]:
    """The user's function or class, and the options it is instrumented with (or None)."""
    # Imported here, not with this module, which each worker instrument() covers loads
    # (program.install): the proxies' imports would cost a Ray Data actor 60 ms or more.
    from raytrace_kit._driver.actor_class import DebuggableActorClass  # noqa: PLC0415
    from raytrace_kit._driver.function import DebuggableFunction  # noqa: PLC0415

    if isinstance(udf, DebuggableFunction | DebuggableActorClass):
        return udf._python, udf._options
    options_for = state.options_for
    return udf, None if options_for is None else options_for(udf)


def _name_of(target: Any) -> str:
    named = getattr(target, "func", target)  # functools.partial
    try:
        return qualified_name(named)
    except AttributeError:
        return f"{type(named).__module__}.{type(named).__qualname__}"


def _check(target: Any, name: str, method: str, kwargs: dict[str, Any]) -> None:
    """Raise before any task starts when Ray cannot send the UDF or what it is given."""
    context = f"building the dataset ({method})"
    report = check_serializable(target, name=name)
    if not report.ok:
        reject(report, context, name)
    for argument in ("fn_args", "fn_kwargs", "fn_constructor_args", "fn_constructor_kwargs"):
        given = kwargs.get(argument)
        if given:
            report = check_serializable(given, name=f"{argument} of {name}", scope="argument")
            if not report.ok:
                reject(report, context, name, redact=True)


def _batch_size(value: Any) -> int | str | None:
    return value if isinstance(value, int | str) else None


# Not the user's code: Ray's, the kit's, wrapt's (the frames between the user and the hook).
_NOT_USERS = tuple(
    os.path.dirname(os.path.abspath(init)) + os.sep
    for init in (ray.__file__, os.path.dirname(__file__), wrapt.__file__)
    if init
)


def _call_site() -> str | None:
    """``file:line`` of the user's code that called the Ray Data method."""
    frame = _user_frame(sys._getframe(2))
    return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _user_frame(frame: Any) -> Any:
    """``frame`` or the first frame above it that runs the user's code, or ``None``."""
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_NOT_USERS):
            return frame
        frame = frame.f_back
    return None
