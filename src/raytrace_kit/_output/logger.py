"""``get_logger()``: the user's structlog events, rendered and written as the kit's own.

The logger has its own processor chain: it neither reads nor changes
``structlog.configure()`` or the ``logging`` configuration of the program.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from raytrace_kit import _process, _registry
from raytrace_kit._output import encode, lines, writer
from raytrace_kit._output import state as output_state
from raytrace_kit._output.context import CURRENT_CALL

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger, Processor, WrappedLogger

__all__ = ["echo", "get_logger"]


# --- processors (structlog's protocol: (logger, method_name, event_dict) -> event_dict) ---


def _add_context(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Add the current call's fields, or this process's ids outside of calls."""
    call = CURRENT_CALL.get()
    if call is None:
        identity = _process.process_identity()
        context: dict[str, Any] = {
            "job_id": identity.job_id,
            "node_id": identity.node_id,
            "worker_id": identity.worker_id,
            "pid": identity.pid,
        }
    else:
        context = dict(call.fields)
    context.update(event_dict)  # what the user bound or passed wins
    return context


def _add_level(
    _logger: WrappedLogger, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    if "level" not in event_dict:
        event_dict["level"] = "warning" if method == "warn" else method
    return event_dict


def _add_timestamp(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    event_dict["timestamp"] = encode.now()
    return event_dict


def _echo(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """With ``echo(True)``, also show the event: in the cell's output, else on stderr."""
    if output_state.state.echo:
        try:
            stream = sys.stdout if _in_kernel() else sys.stderr
            stream.write(lines.readable(dict(event_dict)) + "\n")
        except Exception as exc:
            writer.report_failure("echo", "cannot echo a get_logger() event", exc)
    return event_dict


def _in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (its stdout is the cell's output)."""
    return "ipykernel" in sys.modules and type(sys.stdout).__module__.startswith("ipykernel")


def echo(on: bool = True) -> None:
    """Show this process's ``get_logger()`` events as they happen, one readable line each.

    In a notebook they appear in the cell's output, in a terminal on stderr. They cover the
    driver's own events and those of calls run in local mode (which run here); events of
    calls on Ray workers stay in their files (``raytrace-kit events``). Off by default.

    Args:
        on: ``False`` turns it off again.
    """
    output_state.state.echo = bool(on)


def _to_json_line(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> bytes:
    return encode.event_line(event_dict)


@_registry.cleared_on_reset
@functools.cache
def _chain() -> tuple[Any, tuple[Processor, ...]]:
    """Return structlog's bound-logger class and our processors, built on first use.

    structlog is imported here, not at import time: it imports rich, which would add
    about 40 ms to every ``import raytrace_kit``, worker processes included.
    """
    import structlog  # noqa: PLC0415

    processors: tuple[Processor, ...] = (
        _add_context,
        _add_level,
        _add_timestamp,
        structlog.processors.format_exc_info,
        _echo,
        _to_json_line,
    )
    # Typed Any: structlog types the class it returns as the FilteringBoundLogger protocol,
    # whose constructor takes no arguments.
    base: Any = structlog.make_filtering_bound_logger(logging.NOTSET)

    # Every logging method, guarded: structlog formats "%"-style arguments and looks levels
    # up before our processors run, and any of it may raise on odd input.
    guarded = {
        name: _never_raises(getattr(base, name))
        for name in dir(base)
        if not name.startswith("_")
        and name not in {"bind", "unbind", "try_unbind", "new"}
        and callable(getattr(base, name))
    }
    never_raises = type("NeverRaisesBoundLogger", (base,), guarded)
    return never_raises, processors


def _never_raises(method: Any) -> Any:
    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            writer.report_failure("log-event", "cannot render a get_logger() event", exc)
            return None

    return guarded


class _FileSink:
    """The logger at the end of our structlog chain: writes rendered lines to the file."""

    def msg(self, line: bytes) -> None:
        writer.write_line(line)

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


_SINK = _FileSink()


def get_logger(**bound: Any) -> FilteringBoundLogger:
    """Return a structlog logger whose events land in raytrace_kit's event files.

    Inside an instrumented call, every event carries that call's fields (``call_id``,
    ``function``, ``task_id``, ``actor_id``, ...) and goes to the file of the worker that
    runs it. Elsewhere (the driver, a notebook) events carry this process's Ray ids and go
    to this process's file in :func:`raytrace_kit.log_dir`.

    The logger uses its own processor chain: it neither reads nor changes
    ``structlog.configure()`` or the ``logging`` configuration of the program.

    Args:
        **bound: Key-value pairs added to every event of this logger.

    Returns:
        A structlog bound logger (``info``, ``warning``, ``error``, ``exception``, ``bind``...).

    Example:
        >>> log = get_logger(stage="load")
        >>> log.info("batch.loaded", rows=128)
    """
    bound_logger, processors = _chain()
    logger: FilteringBoundLogger = bound_logger(_SINK, list(processors), {})
    return logger.bind(**bound) if bound else logger
