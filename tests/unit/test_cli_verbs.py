"""Unit tier: the raytrace-kit command is one package, each verb a module of one shape."""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from raytrace_kit import cli

VERB_NAMES = [verb.__name__.rpartition(".")[2] for verb in cli.VERBS]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


class TestOneShape:
    """Every verb registers through the same two functions, and only through them."""

    def test_each_module_of_the_package_is_a_verb_or_common(self) -> None:
        """A new module in cli/ is a verb listed in VERBS (or the shared one)."""
        modules = {p.stem for p in Path(cli.__file__).parent.glob("*.py")} - {"__init__"}
        assert modules == {*VERB_NAMES, "common"}

    @pytest.mark.parametrize("verb", cli.VERBS, ids=VERB_NAMES)
    def test_add_and_run_have_the_one_signature(self, verb: ModuleType) -> None:
        """``add(commands, common) -> None`` and ``run(arguments) -> int``."""
        assert list(inspect.signature(verb.add).parameters) == ["commands", "common"]
        assert list(inspect.signature(verb.run).parameters) == ["arguments"]
        assert inspect.signature(verb.run).return_annotation in {int, "int"}

    def test_each_subcommand_is_handled_by_its_modules_run(self) -> None:
        """The parser's subcommands are the verbs, in order, each with its module's run()."""
        commands = _subcommands(cli._parser())
        assert list(commands) == VERB_NAMES
        for verb, name in zip(cli.VERBS, VERB_NAMES, strict=True):
            assert commands[name].get_default("handler") is verb.run


def test_the_console_script_and_python_m_run_main() -> None:
    """``python -m raytrace_kit`` is the same command: its help lists every verb."""
    done = subprocess.run(
        [sys.executable, "-m", "raytrace_kit", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert all(f"    {name} " in done.stdout for name in VERB_NAMES)
