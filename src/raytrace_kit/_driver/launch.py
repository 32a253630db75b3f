"""``raytrace-kit run``: a program run as ``python`` runs it, with :func:`instrument` in force.

Importing this module imports no Ray: the ``raytrace-kit`` command builds its parser from it.

The script (or ``-m`` module) runs in this process as ``__main__``, with its own
``sys.argv`` and ``sys.path[0]``; its stdout, stderr, signals and exit status are its own:
``sys.exit(n)`` exits with ``n``, an uncaught exception prints the traceback Python would
print (from the script's frame down, without the launcher's) and exits with 1.
"""

from __future__ import annotations

import argparse
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

__all__ = ["EXIT_INTERRUPTED", "add_command", "command", "run", "split_argv"]

EXIT_INTERRUPTED = 130  # what a shell reports for a program stopped by Ctrl-C
_EXIT_USAGE = 2


# run's own options that take a value: what follows them is not the program yet.
_RUN_VALUED = frozenset({"--profile", "--check", "--include", "--exclude", "--capture"})


def add_command(commands: Any) -> None:
    """Add ``run`` to the ``raytrace-kit`` command's subcommands."""
    run = commands.add_parser(
        "run",
        help="run a program with every remote of its code instrumented, unedited",
        usage="raytrace-kit run [OPTIONS] [--] SCRIPT [ARGS...] | -m MODULE [ARGS...]",
        description="Run a Python program as `python SCRIPT` (or `python -m MODULE`) would, "
        "with every Ray remote function and actor class of its code instrumented as if "
        "decorated with @debuggable, and the driver's own record kept. Its output, exit "
        "status and signals are the program's. RAYTRACE_KIT_INSTRUMENT gives defaults "
        "(e.g. log_args,profile=cprofile).",
    )
    run.add_argument(
        "--log-args", action="store_true",
        help="record arguments, and the values of a failed call's locals (redacted)",
    )  # fmt: skip
    run.add_argument("--profile", choices=["memray", "cprofile"], help="profile every call")
    run.add_argument(
        "--check", choices=["first", "always", "on_error", "off"], help="serializability checks"
    )
    run.add_argument(
        "--sample", nargs="?", const=True, type=float, metavar="HZ",
        help="sample every instrumented process's threads (--sample=HZ; default 100 Hz)",
    )  # fmt: skip
    run.add_argument(
        "--capture", choices=["failures"],
        help="keep a failed call's arguments (mode 0600) for raytrace-kit replay",
    )  # fmt: skip
    run.add_argument("--local", action="store_true", help="run every call here (local mode)")
    run.add_argument("--post-mortem", action="store_true", help="debugger at a failing frame")
    run.add_argument(
        "--include", action="append", default=[], metavar="PATTERN",
        help="also instrument modules matching (fnmatch; repeatable): mylib.*",
    )  # fmt: skip
    run.add_argument(
        "--exclude", action="append", default=[], metavar="PATTERN",
        help="never instrument modules matching (repeatable)",
    )  # fmt: skip
    run.add_argument(
        "--no-driver", action="store_true", help="keep no record of the driver's waits"
    )
    run.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m")
    run.add_argument("program", nargs="*", metavar="SCRIPT [ARGS]")


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``run``'s own options, and the program with its arguments (never parsed by us)."""
    at = 1
    while at < len(argv):
        word = argv[at]
        if word == "--":
            return argv[:at], argv[at + 1 :]
        if word == "-m":
            return argv[: at + 2], argv[at + 2 :]
        if not word.startswith("-") or word == "-":
            return argv[:at], argv[at:]
        at += 2 if word in _RUN_VALUED else 1
    return argv, []


def _options(arguments: argparse.Namespace, rest: list[str]) -> int:
    from raytrace_kit._driver import program  # noqa: PLC0415 -- imports Ray: not for --help

    if arguments.module is None and not rest:
        print("raytrace-kit run: name a script (or -m MODULE) to run", file=sys.stderr)
        return _EXIT_USAGE
    options = program.options_from_env(os.environ.get(program.ENV_INSTRUMENT, ""))
    for flag in ("log_args", "local", "post_mortem"):
        if getattr(arguments, flag):
            options[flag] = True
    for name in ("profile", "check", "sample", "capture"):
        if getattr(arguments, name) is not None:
            options[name] = getattr(arguments, name)
    options["include"] = [*options.get("include", []), *arguments.include]
    options["exclude"] = [*options.get("exclude", []), *arguments.exclude]
    local = bool(options.pop("local", False))
    if arguments.no_driver:
        options["driver"] = False
    script = None if arguments.module is not None else rest[0]
    args = rest if arguments.module is not None else rest[1:]
    return run(script, arguments.module, args, local=local, **options)


def command(arguments: argparse.Namespace, rest: list[str]) -> int:
    """``raytrace-kit run``: the program's exit status, or 2 for a bad option of ours."""
    from raytrace_kit.exceptions import RaytraceKitError  # noqa: PLC0415

    try:
        return _options(arguments, rest)
    except RaytraceKitError as exc:  # a bad option, before the program starts (it prints its own)
        print(f"raytrace-kit run: {exc}", file=sys.stderr)
        return _EXIT_USAGE


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
