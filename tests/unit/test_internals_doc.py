"""Unit tier: docs/internals.md says what the code is: its modules, and who imports whom."""

from __future__ import annotations

import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import raytrace_kit

ROOT = Path(__file__).parent.parent.parent
INTERNALS = ROOT / "docs" / "internals.md"
PACKAGE = Path(raytrace_kit.__file__).parent
SVG = "{http://www.w3.org/2000/svg}"


def _depgraph() -> ModuleType:
    """docs/depgraph.py, the script the docs build draws the picture with."""
    spec = importlib.util.spec_from_file_location("depgraph", ROOT / "docs" / "depgraph.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("depgraph", module)
    spec.loader.exec_module(module)
    return module


depgraph = _depgraph()


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```text\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def layout_entries(text: str) -> dict[str, str]:
    """The layout block of internals.md: each module's path (``_output/writer.py``) → its line.

    A directory entry (``_output/``) stands for the package's ``__init__.py``; the entries
    indented under it are its modules.
    """
    block = next(b for b in _blocks(text) if b.startswith("src/raytrace_kit/"))
    entries: dict[str, str] = {}
    folders: list[str] = []
    for line in block.splitlines()[1:]:
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        name, _, description = line.strip().partition(" ")
        folders = folders[:depth]
        path = "".join(folders) + (f"{name}__init__.py" if name.endswith("/") else name)
        assert path not in entries, f"internals.md lists {path} twice"
        entries[path] = description.strip()
        if name.endswith("/"):
            folders.append(name)
    return entries


def documented_imports(text: str) -> dict[str, set[str]]:
    """The "who imports whom" block of internals.md: each room → the rooms it imports."""
    after = text[text.index("Who imports whom") :]
    block = _blocks(after)[0]
    rooms: dict[str, set[str]] = {}
    for line in block.splitlines():
        source, *targets = line.split()
        rooms[_room(source)] = {_room(t) for t in targets if t != "-"}
    return rooms


def _room(label: str) -> str:
    """``_output/`` or ``_html.py`` (as the doc and the picture write rooms) → the room's name."""
    return label.removesuffix("/").removesuffix(".py")


def tree_modules(package: Path) -> set[str]:
    """Every module of the package, by its path inside it."""
    return {str(path.relative_to(package)) for path in package.rglob("*.py")}


class TestLayoutBlock:
    """The layout block of internals.md lists exactly the modules of src/raytrace_kit."""

    def test_every_module_is_listed_and_every_listed_module_exists(self) -> None:
        """A module added, moved or removed without its line in internals.md fails here."""
        listed = set(layout_entries(INTERNALS.read_text(encoding="utf-8")))
        present = tree_modules(PACKAGE)
        unlisted, absent = sorted(present - listed), sorted(listed - present)
        differences = [
            f"{where} ({len(paths)}): {', '.join(paths)}"
            for where, paths in (
                ("in the tree, not in internals.md", unlisted),
                ("in internals.md, not in the tree", absent),
            )
            if paths
        ]
        assert not differences, f"docs/internals.md's layout and {PACKAGE} differ:\n  " + (
            "\n  ".join(differences)
        )

    def test_every_listed_module_says_what_it_holds(self) -> None:
        """Each entry has its sentence (the one line a newcomer reads)."""
        entries = layout_entries(INTERNALS.read_text(encoding="utf-8"))
        silent = sorted(path for path, description in entries.items() if len(description) < 10)
        assert not silent, f"internals.md lists without a description: {silent}"

    def test_the_parser_reads_nesting(self) -> None:
        """Entries under a directory are its modules; the directory is its __init__.py."""
        text = (
            "```text\nsrc/raytrace_kit/\n  a.py       one\n\n  _b/        two\n"
            "    c.py     three\n  d.py       four\n```\n"
        )
        assert layout_entries(text) == {
            "a.py": "one", "_b/__init__.py": "two", "_b/c.py": "three", "d.py": "four"
        }  # fmt: skip


class TestImportsBlock:
    """The "who imports whom" block of internals.md is the code's own import graph."""

    def test_each_room_imports_what_internals_says(self) -> None:
        """A new import between rooms is a decision: written in internals.md, or not made."""
        said = documented_imports(INTERNALS.read_text(encoding="utf-8"))
        done = depgraph.room_edges(PACKAGE)
        differences = []
        for room in sorted(set(said) | set(done)):
            if room not in done:
                differences.append(f"{room}: in internals.md, not a room of the code")
            elif room not in said:
                differences.append(f"{room}: a room of the code, missing from internals.md")
            else:
                more, fewer = done[room] - said[room], said[room] - done[room]
                if more:
                    differences.append(f"{room} imports {sorted(more)}: internals.md says not")
                if fewer:
                    differences.append(
                        f"{room} does not import {sorted(fewer)}: internals.md says it does"
                    )
        assert not differences, "internals.md's imports block and the code differ:\n  " + (
            "\n  ".join(differences)
        )

    def test_the_picture_is_included_and_drawn_before_the_build(self) -> None:
        """internals.md shows the picture, and the docs session draws it before Sphinx runs."""
        assert "](_static/dependencies.svg)" in INTERNALS.read_text(encoding="utf-8")
        noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
        assert "docs/depgraph.py" in noxfile
        assert noxfile.index("docs/depgraph.py") < noxfile.index('"sphinx-build"')


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "raytrace_kit"
    for name, code in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(code)
    return package


class TestDepgraph:
    """docs/depgraph.py finds the imports that run and draws any tree, cycles included."""

    def test_runtime_imports_count_and_type_checking_ones_do_not(self, tmp_path: Path) -> None:
        """Module level, in functions, relative, public names via _LAZY; not TYPE_CHECKING."""
        package = _write(
            tmp_path,
            {
                "__init__.py": "_LAZY = {'thing': 'raytrace_kit._c.thing'}\n",
                "_a.py": (
                    "from typing import TYPE_CHECKING\nfrom raytrace_kit import _b\n"
                    "if TYPE_CHECKING:\n    from raytrace_kit._d import X\nelse:\n    import os\n"
                ),
                "_b.py": "def f():\n    from raytrace_kit import thing\n",
                "_c/__init__.py": "",
                "_c/thing.py": "from .. import _b\nfrom . import other\nimport raytrace_kit\n",
                "_c/other.py": "import raytrace_kit\nraytrace_kit.thing\n",
                "_d.py": "import typing\nif typing.TYPE_CHECKING:\n    import raytrace_kit._a\n",
            },
        )
        assert depgraph.room_edges(package) == {
            "__init__": {"_c"},  # the lazy table
            "_a": {"_b"},
            "_b": {"_c"},
            "_c": {"_b"},  # a cycle: _b and _c import each other
            "_d": set(),
        }

    def test_the_picture_has_one_box_per_room_and_one_arrow_per_import(
        self, tmp_path: Path
    ) -> None:
        """The SVG parses; cycles are drawn too (sideways, in red) rather than failing."""
        package = _write(
            tmp_path,
            {
                "__init__.py": "",
                "_top.py": "import raytrace_kit._mid\nimport raytrace_kit.exceptions\n",
                "_mid/__init__.py": "from raytrace_kit import exceptions, _side\n",
                "_side.py": "import raytrace_kit._mid\n",
                "exceptions.py": "",
            },
        )
        target = tmp_path / "out" / "dependencies.svg"
        edges = depgraph.write_svg(package, target)
        svg = ET.parse(target).getroot()  # noqa: S314 -- the file we just drew
        labels = {t.text for t in svg.iter(f"{SVG}text")}
        assert {"__init__.py", "_top.py", "_mid/", "_side.py", "exceptions.py"} <= labels
        arrows = list(svg.iter(f"{SVG}path"))[1:]  # the first is the arrowhead marker
        assert len(arrows) == sum(len(targets) for targets in edges.values()) == 5
        assert sum("#ff0000" in a.get("stroke", "") for a in arrows) == 2  # _mid ⇄ _side
        assert depgraph.layers(edges)["_top"] > depgraph.layers(edges)["_mid"]

    def test_the_real_package_draws(self, tmp_path: Path) -> None:
        """The tree as it is today draws: every room in a box, every import an arrow."""
        target = tmp_path / "dependencies.svg"
        edges = depgraph.write_svg(PACKAGE, target)
        svg = ET.parse(target).getroot()  # noqa: S314 -- the file we just drew
        labels = {t.text for t in svg.iter(f"{SVG}text")}
        assert {depgraph.label(room, PACKAGE) for room in edges} <= labels
        arrows = list(svg.iter(f"{SVG}path"))[1:]
        assert len(arrows) == sum(len(targets) for targets in edges.values())
