"""attach_debugger(): debugpy or PyCharm inside a task or actor (or anywhere), failing soft.

Remote debuggers open unauthenticated ports. Nothing here listens unless asked, binds to
127.0.0.1 by default, and warns loudly for any other address.
"""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass
from typing import Any, Literal

from raytrace_kit._output import writer
from raytrace_kit.exceptions import InvalidValueError

__all__ = ["DebuggerEndpoint", "attach_debugger"]

_DEFAULT_PORTS = {"debugpy": 5678, "pycharm": 12345}


@dataclass(frozen=True, slots=True)
class DebuggerEndpoint:
    """Where a debugger listens (debugpy) or was reached (PyCharm).

    Attributes:
        kind: ``debugpy`` or ``pycharm``.
        host: The address.
        port: The port.
        pid: The process being debugged.
    """

    kind: str
    host: str
    port: int
    pid: int


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _soft_fail(kind: str, host: str, port: int, reason: str) -> None:
    writer.emit(
        "debugger.unavailable",
        "warning",
        {"debugger": kind, "host": host, "port": port, "reason": reason},
    )
    writer.warn(f"raytrace_kit: {kind} debugger not attached ({reason}); the code goes on.", 4)


def attach_debugger(
    kind: Literal["debugpy", "pycharm"] = "debugpy",
    host: str = "127.0.0.1",
    port: int | None = None,
    wait: bool = False,
) -> DebuggerEndpoint | None:
    """Attach a debugger from inside a task or an actor's ``__init__`` (or anywhere).

    - ``debugpy``: listen on ``host:port`` (port 0 picks a free one); VS Code and other DAP
      clients attach to it. ``wait=True`` blocks until a client attaches.
    - ``pycharm``: connect to PyCharm's debug server (``pydevd_pycharm.settrace``), which
      must be listening; ``wait=True`` suspends at this line.

    A missing package, or an IDE that is not listening, is a warning and a
    ``debugger.unavailable`` event; the code goes on. A host other than loopback prints a
    loud warning: debugger ports have no authentication, and anyone who can reach the port
    can run code in the process.

    Args:
        kind: ``debugpy`` or ``pycharm``.
        host: Where to listen (debugpy) or connect (PyCharm). Default: 127.0.0.1.
        port: Default: 5678 (debugpy), 12345 (PyCharm).
        wait: Block until a client attaches (debugpy), or suspend here (PyCharm).

    Returns:
        The endpoint, or ``None`` if no debugger could be attached.

    Raises:
        InvalidValueError: An unknown ``kind``, or a port that is not a number from 0 to
            65535 (a ``ValueError``).
    """
    if kind not in _DEFAULT_PORTS:
        msg = f"attach_debugger(kind={kind!r}): use 'debugpy' or 'pycharm'."
        raise InvalidValueError(msg)
    port = _DEFAULT_PORTS[kind] if port is None else port
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        msg = (
            f"attach_debugger(port={port!r}): a port is a whole number from 0 to 65535 "
            "(0 picks a free one)."
        )
        raise InvalidValueError(msg)
    if not _is_loopback(host):
        message = (
            f"raytrace_kit: the {kind} debugger will use {host}:{port}, which is not loopback. "
            "Debugger ports are UNAUTHENTICATED: anyone who can reach this port can run "
            "arbitrary code in this process. Prefer 127.0.0.1 and an SSH tunnel or "
            "`kubectl port-forward`."
        )
        sys.stderr.write(f"\n{'!' * 78}\n{message}\n{'!' * 78}\n")
        writer.warn(message, stacklevel=3)
    try:
        endpoint = _attach(kind, host, port, wait)
    except ImportError:
        package = "debugpy" if kind == "debugpy" else "pydevd-pycharm"
        _soft_fail(kind, host, port, f"{package} is not installed: pip install {package}")
        return None
    except Exception as exc:
        _soft_fail(kind, host, port, f"{type(exc).__name__}: {exc}")
        return None
    writer.emit(
        "debugger.attached" if kind == "pycharm" else "debugger.listening",
        "warning",
        {"debugger": kind, "host": endpoint.host, "port": endpoint.port},
    )
    return endpoint


def _attach(kind: str, host: str, port: int, wait: bool) -> DebuggerEndpoint:
    import os  # noqa: PLC0415

    if kind == "debugpy":
        import debugpy  # noqa: PLC0415 -- optional

        listening: Any = debugpy.listen((host, port))
        bound_host, bound_port = listening if isinstance(listening, tuple) else (host, port)
        if wait:
            debugpy.wait_for_client()
        return DebuggerEndpoint(kind, str(bound_host), int(bound_port), os.getpid())
    import pydevd_pycharm  # noqa: PLC0415 -- optional

    pydevd_pycharm.settrace(host, port=port, stdoutToServer=True, stderrToServer=True, suspend=wait)
    return DebuggerEndpoint(kind, host, port, os.getpid())
