"""No import cycle in the package, deferred imports included (docs/internals.md).

An import moved into a function still runs: if the module it names imports the caller's
module, the two are one room that pretends to be two. Only imports under
``if TYPE_CHECKING:`` are left out (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).parents[2] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in SOURCE.joinpath("raytrace_kit").rglob("*.py"):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:``."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    return skipped


def _imported(
    name: str, path: Path, node: ast.Import | ast.ImportFrom, known: set[str]
) -> set[str]:
    """The package's modules an import statement loads (``from m import f``: ``m``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & known
    base = node.module or ""
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    found = set()
    for alias in node.names:
        full = f"{base}.{alias.name}"
        found.add(full if full in known else base)
    return found & known


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_only(tree)
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
                edges |= _imported(name, path, node, known)
        graph[name] = edges - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


class TestImportCycles:
    """The package's modules import one another in one direction only."""

    def test_no_cycle_even_through_deferred_imports(self) -> None:
        """Every module's imports, at the top or in a function, form no cycle."""
        assert _cycles(_graph()) == []

    def test_the_check_sees_a_deferred_cycle(self) -> None:
        """The check itself: two modules that import each other, one from a function."""
        graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
        assert _cycles(graph) == [["a", "b"]]

    def test_the_graph_holds_deferred_imports(self) -> None:
        """An import inside a function is an edge (the CLI's verbs import lazily)."""
        graph = _graph()
        assert "raytrace_kit._driver.replay" in graph["raytrace_kit.cli.replay"]
