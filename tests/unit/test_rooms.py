"""The rooms of ``_reports`` (docs/internals.md): each names what others use of it, lazily."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import raytrace_kit._reports

REPORTS = Path(raytrace_kit._reports.__file__).parent
ROOT = REPORTS.parents[2]
ROOMS = sorted(p.parent.name for p in REPORTS.glob("*/__init__.py") if p.parent.name != "otel")


def _type_checking_names(room: str) -> set[str]:
    """The names a room's ``__init__`` imports under ``if TYPE_CHECKING:`` (what mypy sees)."""
    tree = ast.parse((REPORTS / room / "__init__.py").read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
        if isinstance(inner, ast.ImportFrom)
        for alias in inner.names
    }


class TestRoomNames:
    """Each room's ``__all__`` is what it loads on use and what mypy is told it holds."""

    @pytest.mark.parametrize("room", ROOMS)
    def test_every_name_loads_from_its_module(self, room: str) -> None:
        """A name in ``__all__`` resolves, to the object of the module it is said to be in."""
        package = importlib.import_module(f"raytrace_kit._reports.{room}")
        for name in package.__all__:
            assert getattr(package, name) is not None
        assert set(package.__all__) == _type_checking_names(room)

    @pytest.mark.parametrize("room", ROOMS)
    def test_an_unknown_name_is_an_attribute_error(self, room: str) -> None:
        """``hasattr`` and ``from room import module`` work as for any package."""
        package = importlib.import_module(f"raytrace_kit._reports.{room}")
        assert not hasattr(package, "no_such_name")

    def test_a_room_loads_nothing_until_a_name_is_used(self) -> None:
        """Importing a room imports none of its modules (the rooms import each other's)."""
        code = (
            "import sys; import raytrace_kit._reports.run as run; "
            "print(sorted(m for m in sys.modules if m.startswith('raytrace_kit._reports.')))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == "['raytrace_kit._reports.run']"


def _imports_of_room_modules(path: Path) -> list[str]:
    """The imports in ``path`` that name a room's module, not the room."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            # otel's modules are its front door (export, follow, stream: one per use).
            if parts[:2] == ["raytrace_kit", "_reports"] and len(parts) > 3 and parts[2] != "otel":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}")
    return found


def test_code_outside_reports_imports_rooms_not_their_modules() -> None:
    """The kit outside _reports, benchmarks, examples and docs import from rooms, not modules.

    Tests may reach a module's private members (``_trace``, ``_HEAD``) through the module.
    """
    outside = [
        path
        for folder in ("src/raytrace_kit", "benchmarks", "examples", "docs")
        for path in (ROOT / folder).rglob("*.py")
        if REPORTS not in path.parents
    ]
    found = [line for path in outside for line in _imports_of_room_modules(path)]
    assert not found, "imports of a room's module from outside _reports:\n  " + "\n  ".join(found)
