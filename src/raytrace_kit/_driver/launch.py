"""A program run as ``python`` runs it, with :func:`instrument` in force: ``raytrace-kit run``.

Its options are :mod:`raytrace_kit.cli.run`'s; importing this module imports no Ray.

The script (or ``-m`` module) runs in this process as ``__main__``, with its own
``sys.argv`` and ``sys.path[0]``; its stdout, stderr, signals and exit status are its own:
``sys.exit(n)`` exits with ``n``, an uncaught exception prints the traceback Python would
print (from the script's frame down, without the launcher's) and exits with 1.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import io
import os
import runpy
import sys
import types
import zipfile
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["EXIT_INTERRUPTED", "run"]

EXIT_INTERRUPTED = 130  # what a shell reports for a program stopped by Ctrl-C


def run(
    script: str | None,
    module: str | None,
    arguments: list[str],
    *,
    local: bool = False,
    **options: Any,
) -> int:
    """Run ``script`` (or ``module``) with ``arguments``, instrumented; return its exit code.

    ``SystemExit`` raised by the program passes through (Python exits as the program
    asked). ``options`` are :func:`instrument`'s.

    Raises:
        SystemExit: The program's own.
    """
    from raytrace_kit._driver import program, record  # noqa: PLC0415 -- imports Ray

    what = module if module is not None else str(script)
    sys.argv = [what, *arguments]  # what the driver's record says ran
    program.instrument(**options)
    if local:
        from raytrace_kit._local.switch import set_local_mode  # noqa: PLC0415

        set_local_mode(True)
    try:
        if module is not None:
            sys.path[0] = os.getcwd()  # as python -m; runpy puts the module's path in argv[0]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            _run_script(what)
    except SystemExit as exc:
        record.finish(_status(exc.code))
        raise
    except BaseException as exc:
        record.finish(1, type(exc).__name__)
        exc.__traceback__ = _from_the_program(exc.__traceback__)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        return EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 1
    record.finish(0)
    return 0


def _run_script(script: str) -> None:
    """``python SCRIPT``: ``__main__`` made of the file, its ``__file__`` absolute.

    A directory or zip file (with a ``__main__.py``) runs through runpy, as Python does.
    """
    path = Path(script).absolute()
    if path.is_dir() or zipfile.is_zipfile(path):
        sys.path[0] = str(path)
        runpy.run_path(str(path), run_name="__main__")
        return
    sys.path[0] = str(path.resolve().parent)
    with io.open_code(str(path)) as source:  # the bytes: compile() reads the encoding
        code = compile(source.read(), str(path), "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__file__ = str(path)
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", str(path))
    vars(main)["__builtins__"] = builtins  # as in Python's own __main__
    sys.modules["__main__"] = main
    exec(code, main.__dict__)  # noqa: S102 -- running the user's program is the point


def _status(code: object) -> int:
    """The exit status Python gives ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1  # a message: printed to stderr, status 1


_LAUNCHER = frozenset({"runpy", __name__})


def _from_the_program(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame on (the launcher's and runpy's cut)."""
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in _LAUNCHER:
        tb = tb.tb_next
    return tb
