"""Unit tier: which rows of a call's cProfile file are the kit's (no Ray started)."""

from __future__ import annotations

import sysconfig

from raytrace_kit._output.frames import on_call_path
from raytrace_kit._worker.profilers import _in_stdlib


class TestWhoseRows:
    """The kit's call path goes; the user's code stays, wherever it is installed."""

    def test_a_pip_installed_function_is_the_users(self) -> None:
        """site-packages sits under the stdlib dir in some images: still the user's."""
        installed = sysconfig.get_paths()["purelib"] + "/pipeline/stages.py"
        assert not _in_stdlib(installed)
        assert _in_stdlib(sysconfig.get_paths()["stdlib"] + "/contextlib.py")

    def test_only_the_kits_call_path_is_the_kits(self) -> None:
        """A user's folder named raytrace_kit is not the kit; the kit's logger is their cost."""
        assert on_call_path("/opt/venv/site-packages/raytrace_kit/_worker/boundary.py")
        assert on_call_path("/home/me/src/raytrace_kit/_local/run.py")
        assert not on_call_path("/home/me/raytrace_kit/examples/run_report.py")
        assert not on_call_path("/opt/venv/site-packages/raytrace_kit/_output/logger.py")
