"""Ray Data's UDFs as calls, in the task or actor Ray Data runs them in.

The driver's hook (``_driver/data_hooks.py``) hands Ray Data one of these in place of the
user's UDF; Ray Data pickles it with its plan and calls it in its own map tasks and actors.

- A function given to ``map_batches``, ``map_groups`` or ``add_column``: a
  :class:`BatchFunction`. Each batch is one call (``call.start``/``call.end``, as a task's),
  with its operator, and ``call.end`` gains the batch's rows and bytes in and out.
- A callable class: a subclass made by :func:`~raytrace_kit._worker.data_class.data_class`,
  named as the user's class, whose ``__init__`` is one call per actor and whose ``__call__``
  is one call per batch.
- A function given per row (``map``, ``flat_map``, ``filter``): a :class:`RowFunction`.
  A call per row would cost more than most rows take, so rows are counted, timed and
  written as one ``data.rows`` event per tenth of a second (or 10,000 rows) in each
  process; a row that fails is written as a call, with its traceback and locals.

Ray Data's results, errors and batch formats pass through untouched: the UDF's exception
reaches Ray Data's own handling as it was raised.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from raytrace_kit import _process, _registry
from raytrace_kit._options import CallSpec
from raytrace_kit._output import writer
from raytrace_kit._ray_compat import data as data_compat
from raytrace_kit._worker import boundary

__all__ = [
    "MARK",
    "Specs",
    "batch_function",
    "flush_rows",
    "row_function",
    "run_batch",
    "run_batch_async",
    "run_batch_async_generator",
    "run_batch_generator",
    "run_row",
    "sizes",
]

_LAST_OP: list[str | None] = [None]
_ROWS_FLUSH_S = 0.1
_ROWS_FLUSH_COUNT = 10_000


def sizes(batch: Any) -> tuple[int | None, int | None]:
    """Rows and bytes of a batch (a dict of arrays, a DataFrame, an Arrow table); never raises."""
    try:
        if isinstance(batch, dict):
            rows = None
            total = 0
            for value in batch.values():
                if rows is None and hasattr(value, "__len__"):
                    rows = len(value)
                total += int(getattr(value, "nbytes", 0) or 0)
            return rows, total
        module = type(batch).__module__
        if module.startswith("pandas") and hasattr(batch, "memory_usage"):  # a DataFrame
            return len(batch), int(batch.memory_usage(index=True, deep=False).sum())
        if hasattr(batch, "nbytes") and hasattr(batch, "__len__"):  # Arrow, an array, a column
            return len(batch), int(batch.nbytes)
    except Exception:  # a batch of another kind: its sizes are unknown, the call runs
        return None, None
    return None, None


def _data_members(
    rows_in: int | None, bytes_in: int | None, rows_out: int | None, bytes_out: int | None
) -> str:
    op = data_compat.current_operator()
    if op is None:  # an actor's UDF thread: the operator its map tasks ran under here
        op = _LAST_OP[0]
    else:
        _LAST_OP[0] = op
    return (
        f',"data":{{"op":{"null" if op is None else _quoted(op)},'
        f'"rows_in":{_n(rows_in)},"bytes_in":{_n(bytes_in)},'
        f'"rows_out":{_n(rows_out)},"bytes_out":{_n(bytes_out)}}}'
    )


def _n(value: int | None) -> str:
    return "null" if value is None else str(value)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _add(total: tuple[int | None, int | None], more: tuple[int | None, int | None]) -> Any:
    rows = None if total[0] is None or more[0] is None else total[0] + more[0]
    size = None if total[1] is None or more[1] is None else total[1] + more[1]
    return rows, size


def run_batch(  # noqa: PLR0917 -- the boundary's parameters and the batch's
    spec: CallSpec,
    fn: Callable[..., Any],
    batch: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    instance: Any = None,
) -> Any:
    """One batch through ``fn`` as one call; its rows and bytes on ``call.end``.

    ``instance``: a callable class's, for ``fn`` its class's ``__call__`` (the call's
    ``self``: what locals and replay see first).
    """
    within = sizes(batch)
    given = (batch, *args) if instance is None else (instance, batch, *args)
    owner = None if instance is None else id(instance)
    call = boundary.Boundary(spec, fn, given, kwargs, owner)
    with call:
        call.end_tail = _data_members(*within, None, None)  # a failed batch: its input
        if (tracker := call.tracker) is not None:
            try:
                tracker.__enter__()
            except Exception as exc:
                tracker = call.not_tracked(exc)
        try:
            result = fn(*given, **kwargs)
        finally:
            if tracker is not None:
                call.untrack(tracker)
        call.end_tail = _data_members(*within, *sizes(result))
        return call.returned(result)


def run_batch_generator(  # noqa: PLR0917 -- as run_batch()
    spec: CallSpec,
    fn: Callable[..., Any],
    batch: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    instance: Any = None,
) -> Generator[Any, Any, Any]:
    """A UDF that yields its output batches: one call that ends when it is exhausted."""
    within = sizes(batch)
    given = (batch, *args) if instance is None else (instance, batch, *args)
    owner = None if instance is None else id(instance)
    call = boundary.Boundary(spec, fn, given, kwargs, owner, cpu=False)
    with call:
        out: tuple[int | None, int | None] = (0, 0)
        call.end_tail = _data_members(*within, None, None)
        for item in fn(*given, **kwargs):
            out = _add(out, sizes(item))
            call.end_tail = _data_members(*within, *out)
            yield item


async def run_batch_async(  # noqa: PLR0917 -- as run_batch()
    spec: CallSpec,
    fn: Callable[..., Any],
    batch: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    instance: Any = None,
) -> Any:
    """An ``async def __call__`` of a callable class: one call per batch."""
    within = sizes(batch)
    given = (instance, batch, *args)
    call = boundary.Boundary(spec, fn, given, kwargs, id(instance), cpu=False)
    with call:
        call.end_tail = _data_members(*within, None, None)
        result = await fn(*given, **kwargs)
        call.end_tail = _data_members(*within, *sizes(result))
        return result


async def run_batch_async_generator(  # noqa: PLR0917 -- as run_batch()
    spec: CallSpec,
    fn: Callable[..., Any],
    batch: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    instance: Any = None,
) -> AsyncIterator[Any]:
    """An async generator ``__call__``: one call that ends when it is exhausted."""
    within = sizes(batch)
    given = (instance, batch, *args)
    call = boundary.Boundary(spec, fn, given, kwargs, id(instance), cpu=False)
    with call:
        out: tuple[int | None, int | None] = (0, 0)
        call.end_tail = _data_members(*within, None, None)
        async for item in fn(*given, **kwargs):
            out = _add(out, sizes(item))
            call.end_tail = _data_members(*within, *out)
            yield item


MARK = "__raytrace_kit_data__"  # on the UDFs this module makes: the user's own


class Specs:
    """The specs of one UDF's calls, set once Ray Data has named its operator."""

    __slots__ = ("call", "init", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.init: CallSpec | None = None
        self.call: CallSpec | None = None

    def __getstate__(self) -> tuple[str, CallSpec | None, CallSpec | None]:
        return self.name, self.init, self.call

    def __setstate__(self, kept: tuple[str, CallSpec | None, CallSpec | None]) -> None:
        self.name, self.init, self.call = kept


def _named_like(replacement: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    """``replacement`` named as Ray Data would name ``fn`` (its operator's name follows)."""
    named = fn.func if isinstance(fn, functools.partial) else fn
    if not (inspect.isfunction(named) or inspect.ismethod(named)):
        named = type(named)  # a callable object: Ray Data names it by its class
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        value = getattr(named, attribute, None)
        if value is not None:
            setattr(replacement, attribute, value)
    replacement.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(replacement, MARK, fn)
    return replacement


def batch_function(fn: Callable[..., Any], specs: Specs) -> Callable[..., Any]:
    """A function UDF of whole batches, each call of it one recorded call.

    A function, not a callable object: Ray Data names the operator after a function's
    ``__name__`` but after a callable object's class, and the names must be plain Ray's.
    """
    generator = inspect.isgeneratorfunction(getattr(fn, "func", fn))

    def udf(batch: Any, *args: Any, **kwargs: Any) -> Any:
        spec = specs.call
        if spec is None:  # called before the dataset was made (not by Ray Data): as it is
            return fn(batch, *args, **kwargs)
        if generator:
            return run_batch_generator(spec, fn, batch, args, kwargs)
        return run_batch(spec, fn, batch, args, kwargs)

    return _named_like(udf, fn)


def row_function(fn: Callable[..., Any], specs: Specs) -> Callable[..., Any]:
    """A function UDF of rows: counted and timed; a failing row recorded as a call."""

    def udf(row: Any, *args: Any, **kwargs: Any) -> Any:
        spec = specs.call
        if spec is None:
            return fn(row, *args, **kwargs)
        return run_row(spec, fn, row, args, kwargs)

    return _named_like(udf, fn)


def run_row(
    spec: CallSpec, fn: Callable[..., Any], row: Any, args: tuple[Any, ...], kwargs: Any
) -> Any:
    started = time.perf_counter()
    try:
        result = fn(row, *args, **kwargs)
    except BaseException as exc:
        _row_failed(spec, fn, (row, *args), kwargs, exc)
        raise
    _ROWS.add(spec, time.perf_counter() - started)
    return result


def _row_failed(
    spec: CallSpec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any, exc: BaseException
) -> None:
    """The failed row as one call, written once it failed (its start: when it failed)."""
    try:
        call = boundary.Boundary(spec, fn, args, kwargs)
        call.__enter__()
        call.end_tail = _data_members(1, None, None, None)
        call.__exit__(type(exc), exc, exc.__traceback__)
    except Exception as error:
        writer.report_failure("data-row", "cannot record a failed row", error)


class _Rows:
    """The rows each row UDF of this process ran since its last ``data.rows`` event.

    Written every :data:`_ROWS_FLUSH_S` (by a thread of its own, so the last rows of a
    worker that then idles are written too) or :data:`_ROWS_FLUSH_COUNT` rows, and at exit.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # (function, operator) -> [rows, seconds, the physical operator]
        self.counts: dict[tuple[str, str | None], list[Any]] = {}
        self.pending = 0
        self.thread: threading.Thread | None = None

    def add(self, spec: CallSpec, seconds: float) -> None:
        key = (spec.function, spec.operator)
        with self.lock:
            entry = self.counts.get(key)
            if entry is None:
                entry = self.counts[key] = [0, 0.0, data_compat.current_operator()]
                if self.thread is None:
                    self._start()
            entry[0] += 1
            entry[1] += seconds
            self.pending += 1
            due = self.pending >= _ROWS_FLUSH_COUNT
        if due:
            self.flush()

    def _start(self) -> None:
        atexit.register(flush_rows)  # what is counted last, as the worker exits
        self.thread = threading.Thread(target=_flusher, name="raytrace_kit-rows", daemon=True)
        self.thread.start()

    def flush(self) -> None:
        with self.lock:
            counts, self.counts, self.pending = self.counts, {}, 0
        for (function, operator), (rows, seconds, op) in counts.items():
            fields = {"function": function, "operator": operator, "op": op, "rows": rows}
            fields["duration_s"] = round(seconds, 6)
            fields["pid"] = _process.process_identity().pid
            writer.emit("data.rows", "info", fields)


def _flusher() -> None:
    """The rows thread: writes what was counted, every tenth of a second it has any."""
    while True:
        time.sleep(_ROWS_FLUSH_S)
        if _ROWS.pending:
            flush_rows()


_ROWS = _Rows()


def _renew() -> None:
    """A forked child counts its own rows, with a thread of its own (the parent's is gone)."""
    _ROWS.lock = threading.Lock()
    _ROWS.counts, _ROWS.pending, _ROWS.thread = {}, 0, None


_registry.register(_renew, _renew, layer=_registry.WORKER)


def flush_rows() -> None:
    """Write the rows counted and not yet written (at exit; never raises)."""
    try:
        _ROWS.flush()
    except Exception as exc:
        writer.report_failure("data-rows", "cannot write the rows counted", exc)
