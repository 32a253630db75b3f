"""instrument()'s choices made without Ray: whose code, the environment variable, run's argv."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

import raytrace_kit
from raytrace_kit._driver import program
from raytrace_kit._options import Program
from raytrace_kit.cli import run as run_command
from raytrace_kit.exceptions import InvalidOptionError


class TestWhoseCode:
    """The user's modules are instrumented; the standard library, packages and Ray are not."""

    @pytest.mark.parametrize(
        ("module", "instrumented"),
        [
            ("__main__", True),
            ("tests.helpers", True),  # a checkout: the user's own
            ("json", False),  # the standard library
            ("msgspec", False),  # installed in site-packages
            ("ray.data", False),  # Ray's own libraries
            ("raytrace_kit._driver.program", False),  # never the kit itself
            ("made.at.run.time", True),  # not imported from a file: exec'd code, a notebook
        ],
    )
    def test_default(
        self, module: str, instrumented: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        # __main__ as a user's script has it (python -m pytest would make it pytest's own).
        script = types.ModuleType("__main__")
        script.__file__ = str(tmp_path / "pipeline.py")
        monkeypatch.setitem(sys.modules, "__main__", script)
        assert program.selected(module, Program(program.install)) is instrumented

    def test_include_and_exclude(self) -> None:
        chosen = Program(program.install, include=("msgspec*",), exclude=("tests.*",))
        assert program.selected("msgspec", chosen)
        assert not program.selected("tests.helpers", chosen)
        assert not program.selected("raytrace_kit", Program(program.install, include=("*",)))


class TestSettings:
    """Options from the environment and from instrument() are checked before anything runs."""

    @pytest.mark.parametrize(
        ("value", "keywords"),
        [
            ("1", {}),
            ("true", {}),
            ("log_args", {"log_args": True}),
            (
                "log-args=no, profile=cprofile,include=a.*,include=b.*",
                {"log_args": False, "profile": "cprofile", "include": ["a.*", "b.*"]},
            ),
        ],
    )
    def test_environment_variable(self, value: str, keywords: dict[str, object]) -> None:
        assert program.options_from_env(value) == keywords

    def test_bad_settings_name_the_fix(self) -> None:
        with pytest.raises(InvalidOptionError, match="unknown raytrace_kit option 'colour'"):
            raytrace_kit.instrument(colour="red")  # type: ignore[call-arg]
        with pytest.raises(InvalidOptionError, match="pin the one you are debugging"):
            raytrace_kit.instrument(pin=True)
        with pytest.raises(InvalidOptionError, match="module name patterns"):
            raytrace_kit.instrument(include=[3])  # type: ignore[list-item]
        assert not program.is_instrumented()


class TestRunArguments:
    """run's own options end where the program starts; the program's are never parsed."""

    @pytest.mark.parametrize(
        ("argv", "own", "rest"),
        [
            (["run", "app.py", "--local"], ["run"], ["app.py", "--local"]),
            (["run", "--profile", "cprofile", "app.py", "-x"], ["run", "--profile", "cprofile"],
             ["app.py", "-x"]),
            (["run", "--log-args", "--", "--odd-name.py"], ["run", "--log-args"],
             ["--odd-name.py"]),
            (["run", "-m", "pkg.main", "--check", "off"], ["run", "-m", "pkg.main"],
             ["--check", "off"]),
        ],
    )  # fmt: skip
    def test_split(self, argv: list[str], own: list[str], rest: list[str]) -> None:
        assert run_command.split_argv(argv) == (own, rest)


class TestArgumentsShown:
    """--log-args writes the program's arguments; secret-looking options' values stay out."""

    def test_secret_options_redacted(self) -> None:
        from raytrace_kit._output.redact import shown_argv  # noqa: PLC0415 -- one test's

        argv = ["--input", "data/", "--api-key", "s3cr3t", "--token=abc", "--db-password",
                "hunter2", "postgres://me:pw@db/x", "-v"]  # fmt: skip
        assert shown_argv(argv) == [
            "--input", "data/", "--api-key", "<redacted>", "--token=<redacted>",
            "--db-password", "<redacted>", "postgres://me:<redacted>@db/x", "-v",
        ]  # fmt: skip
