"""Tests that drive a real terminal (tmux) beside a cluster: run by ``nox -s terminal``.

They need ``tmux`` and start a 3-node cluster, so the default ``nox`` skips them, saying
so; ``nox -s terminal`` (which installs tmux from Debian's packages when it is missing)
sets ``RAYTRACE_TERMINAL_TESTS=1`` and runs them.
"""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip this directory's tests unless asked for (and tmux is there)."""
    if os.environ.get("RAYTRACE_TERMINAL_TESTS") != "1":
        why = "drives tmux beside a 3-node cluster: run with nox -s terminal"
    elif shutil.which("tmux") is None:
        why = "needs tmux (nox -s terminal installs it)"
    else:
        return
    for item in items:
        if "terminal" in item.path.parts:
            item.add_marker(pytest.mark.skip(reason=why))
