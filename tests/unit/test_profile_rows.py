"""Unit tier: which rows of a call's cProfile file are the kit's (no Ray started)."""

from __future__ import annotations

import importlib.util
import os
import pstats
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable
from raytrace_kit._output import frames
from raytrace_kit._output.frames import in_stdlib, on_call_path
from tests.helpers import events_of

# A module of the user's, as pip installs it.
STAGES = """
def clean(rows):
    return sorted(row.strip() for row in rows)
"""


def installed_module(site: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``name`` written to ``site`` and imported from there (forgotten after the test)."""
    site.mkdir(parents=True)
    path = site / f"{name}.py"
    path.write_text(STAGES)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


class TestWhoseRows:
    """The kit's call path goes; the user's code stays, wherever it is installed."""

    def test_a_pip_installed_function_is_the_users(self) -> None:
        """site-packages sits under the stdlib dir in some images: still the user's."""
        installed = sysconfig.get_paths()["purelib"] + "/pipeline/stages.py"
        assert not in_stdlib(installed)
        assert in_stdlib(sysconfig.get_paths()["stdlib"] + "/contextlib.py")
        assert in_stdlib(threading.__file__)

    @pytest.mark.parametrize("packages", ["site-packages", "dist-packages"])
    def test_a_pip_installed_function_keeps_its_row(
        self, packages: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Code of a site-packages inside the stdlib dir (Docker's python images) keeps its row."""
        stdlib = tmp_path / "usr" / "local" / "lib" / "python3.11"
        monkeypatch.setattr(frames, "_stdlib_dirs", lambda: (str(stdlib) + os.sep,))
        stages = installed_module(stdlib / packages, "pipeline_stages", monkeypatch)
        clean = debuggable(profile="cprofile")(stages.clean)
        with raytrace_kit.local_mode():
            assert ray.get(clean.remote([" b", "a "])) == ["a", "b"]
        (end,) = events_of(stages.clean, "call.end")
        stats = pstats.Stats(end["profile_path"])
        table: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
        assert (stages.__file__, 2, "clean") in table
        assert not [key for key in table if "raytrace_kit" in key[0]]

    def test_only_the_kits_call_path_is_the_kits(self) -> None:
        """A user's folder named raytrace_kit is not the kit; the kit's logger is their cost."""
        assert on_call_path("/opt/venv/site-packages/raytrace_kit/_worker/boundary.py")
        assert on_call_path("/home/me/src/raytrace_kit/_local/run.py")
        assert not on_call_path("/home/me/raytrace_kit/examples/run_report.py")
        assert not on_call_path("/opt/venv/site-packages/raytrace_kit/_output/logger.py")
