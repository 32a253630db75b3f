"""Unit tier: the rules of the house (docs/internals.md), checked on the source itself."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import raytrace_kit

PACKAGE = Path(raytrace_kit.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))
# Private members of Ray objects, and Ray's private modules: only _ray_compat may touch them.
RAY_PRIVATE = re.compile(
    r"ray\._private|ray\._raylet|\._default_options|\._function\b|__ray_metadata__|global_worker"
)


def _code(path: Path) -> str:
    """The module without docstrings and comments: the code that runs."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        if docstring and isinstance(first.value.value, str):  # type: ignore[union-attr]
            body[0] = ast.Pass()
    return ast.unparse(tree)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_rays_private_api_only_in_ray_compat(path: Path) -> None:
    """A Ray upgrade is one file to check."""
    if path.name == "_ray_compat.py":
        return
    assert not RAY_PRIVATE.findall(_code(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_global_statements_and_short_modules(path: Path) -> None:
    """Process state lives in _process.state; each module stays under about 400 lines."""
    tree = ast.parse(path.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Global)]
    assert len(path.read_text().splitlines()) <= 400


def test_import_adds_no_profiler_or_structlog() -> None:
    """Import raytrace_kit stays light: memray and structlog load on first use only."""
    code = (
        "import sys, raytrace_kit; "
        "print(sorted(m for m in ('memray', 'structlog', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
