"""``raytrace-kit run``: its options, turned into :func:`instrument`'s, and the program run.

The program and its arguments are never parsed by us: :func:`split_argv` cuts them off
before argparse sees the line. The program runs in :mod:`raytrace_kit._driver.launch`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from raytrace_kit._reports.reading import KIT_RUN_VALUED  # what follows them is no program
from raytrace_kit.cli.common import EXIT_USAGE

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run", "split_argv"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:  # run has no -q
    """Add ``run`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "run",
        help="run a program with every remote of its code instrumented, unedited",
        usage="raytrace-kit run [OPTIONS] [--] SCRIPT [ARGS...] | -m MODULE [ARGS...]",
        description="Run a Python program as `python SCRIPT` (or `python -m MODULE`) would, "
        "with every Ray remote function and actor class of its code instrumented as if "
        "decorated with @debuggable, and the driver's own record kept. Its output, exit "
        "status and signals are the program's. RAYTRACE_KIT_INSTRUMENT gives defaults "
        "(e.g. log_args,profile=cprofile).",
    )
    parser.add_argument(
        "--log-args",
        action="store_true",
        help="record arguments, and the values of a failed call's locals (redacted)",
    )
    parser.add_argument("--profile", choices=["memray", "cprofile"], help="profile every call")
    parser.add_argument(
        "--check", choices=["first", "always", "on_error", "off"], help="serializability checks"
    )
    parser.add_argument(
        "--sample",
        nargs="?",
        const=True,
        type=float,
        metavar="HZ",
        help="sample every instrumented process's threads (--sample=HZ; default 100 Hz)",
    )
    parser.add_argument(
        "--capture",
        choices=["failures"],
        help="keep a failed call's arguments (mode 0600) for raytrace-kit replay",
    )
    parser.add_argument("--local", action="store_true", help="run every call here (local mode)")
    parser.add_argument("--post-mortem", action="store_true", help="debugger at a failing frame")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="also instrument modules matching (fnmatch; repeatable): mylib.*",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="never instrument modules matching (repeatable)",
    )
    parser.add_argument(
        "--no-driver", action="store_true", help="keep no record of the driver's waits"
    )
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m")
    parser.add_argument("program", nargs="*", metavar="SCRIPT [ARGS]")
    parser.set_defaults(handler=run)


def _rate_not_a_script(word: str) -> None:
    """``--sample 250 app.py``: 250 was cut off as the script (``--sample``'s rate is optional).

    Raises:
        InvalidOptionError: ``word`` is a number and no file of that name is here.
    """
    from raytrace_kit.exceptions import InvalidOptionError  # noqa: PLC0415

    try:
        float(word)
    except ValueError:
        return
    if os.path.exists(word):  # a script named 250, strange as it is, runs
        return
    msg = (
        f"--sample {word} reads {word} as the script to run (the rate is optional): join "
        f"it to the option, --sample={word}, or give --sample alone for 100 Hz"
    )
    raise InvalidOptionError(msg, "sample")


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
        at += 2 if word in KIT_RUN_VALUED else 1
    return argv, []


def run(arguments: argparse.Namespace) -> int:
    """``raytrace-kit run``: the program's exit status, or 2 for a bad option of ours.

    ``arguments.program`` is the program and its arguments, as :func:`split_argv` cut them.
    """
    from raytrace_kit.exceptions import RaytraceKitError  # noqa: PLC0415

    try:
        return _options(arguments, arguments.program)
    except RaytraceKitError as exc:  # a bad option, before the program starts (it prints its own)
        print(f"raytrace-kit run: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _options(arguments: argparse.Namespace, rest: list[str]) -> int:
    from raytrace_kit._driver import launch, program  # noqa: PLC0415 -- Ray: not for --help

    if arguments.module is None and not rest:
        print("raytrace-kit run: name a script (or -m MODULE) to run", file=sys.stderr)
        return EXIT_USAGE
    if arguments.module is None and arguments.sample is True:
        _rate_not_a_script(rest[0])
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
    return launch.run(script, arguments.module, args, local=local, **options)
