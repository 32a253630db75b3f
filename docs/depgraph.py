"""Draw the rooms of ``src/raytrace_kit`` and the imports between them: run by the docs build.

- ``_static/dependencies.svg``: one box per room (a top-level module, or a subpackage with
  everything in it), an arrow from a room to each room it imports, rows by layer: every room
  sits above all the rooms it imports, so siblings (rooms that do not import each other)
  share a row.

The edges come from the code itself, parsed with :mod:`ast` (nothing is imported, so the
picture can be drawn from any tree, even one that does not import): every ``import`` that
runs counts, at module level or inside a function; imports under ``if TYPE_CHECKING:`` do
not. A public name, ``from raytrace_kit import name`` or ``raytrace_kit.name``, counts
as an import of the module the package's ``_LAZY`` table loads it from, and that table is
what the package's ``__init__`` imports (on first use). No arrow points at ``__init__``:
every module imports it first. The SVG is written by hand (no graphviz, no network) and is
the same for the same code, so it changes only when the imports do.

Run: python docs/depgraph.py [SRC_PACKAGE_DIR [TARGET_SVG]]
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Iterator
from html import escape
from pathlib import Path

HERE = Path(__file__).parent
PACKAGE = "raytrace_kit"
INIT = "__init__"  # the room of the package's own __init__.py

# Layout of the picture, in pixels.
CHAR_WIDTH = 7.8  # of a 13px monospace font
BOX_HEIGHT = 28
ROW_GAP = 64
BOX_GAP = 22
DUMMY_WIDTH = 6  # where a long arrow passes through a row
MARGIN = 24
TITLE_HEIGHT = 44
# A room's box and the arrows that leave it share a colour, to follow an arrow in a bundle.
PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#ff7f0e", "#393b79", "#637939", "#843c39", "#7b4173", "#222222",
)  # fmt: skip
LEGEND = (
    "A → B: code in A imports B when it runs (dashed: on first use of a public name;"
    " red: an import cycle)"
)


def module_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (``raytrace_kit._output.writer``)."""
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([PACKAGE, *parts])] = path
    return found


def room_of(module: str) -> str:
    """``raytrace_kit._output.writer`` → ``_output``; the package itself → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else INIT


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except what sits under ``if TYPE_CHECKING:`` (its else runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def lazy_table(package_dir: Path) -> dict[str, str]:
    """The package's ``_LAZY`` table: public name → the module that defines it."""
    init = package_dir / "__init__.py"
    if not init.is_file():
        return {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "_LAZY":
            value = ast.literal_eval(node.value)  # type: ignore[attr-defined]
            return {str(k): str(v) for k, v in value.items()}
    return {}


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute name of what ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_modules(module: str, path: Path, known: set[str], lazy: dict[str, str]) -> set[str]:
    """The package's modules that ``module`` imports when it runs (TYPE_CHECKING left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    if module == PACKAGE:
        found.update(lazy.values())  # __getattr__ imports these on first use
    for node in runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == PACKAGE
            and node.attr in lazy
        ):
            found.add(lazy[node.attr])  # import raytrace_kit; raytrace_kit.report(...)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node, is_package)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                if name in known:
                    found.add(name)  # from raytrace_kit import _process: the submodule
                elif base == PACKAGE and alias.name in lazy:
                    found.add(lazy[alias.name])  # a public name, loaded from its module
                else:
                    found.add(base)
    # Every module imports the package's __init__ first: an arrow to it would say nothing.
    return {name for name in found if name in known and name != PACKAGE}


def room_edges(package_dir: Path) -> dict[str, set[str]]:
    """Each room and the other rooms its code imports when it runs."""
    files = module_files(package_dir)
    lazy = lazy_table(package_dir)
    edges: dict[str, set[str]] = {room_of(m): set() for m in files}
    for module, path in files.items():
        for target in imported_modules(module, path, set(files), lazy):
            if room_of(target) != room_of(module):
                edges[room_of(module)].add(room_of(target))
    return edges


def _components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), so that a cycle cannot break the layering."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for target in sorted(edges[room]):
            if target not in index:
                visit(target)
                low[room] = min(low[room], low[target])
            elif target in stack:
                low[room] = min(low[room], index[target])
        if low[room] == index[room]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == room:
                    break
            found.append(sorted(component))

    for room in sorted(edges):
        if room not in index:
            visit(room)
    return found


def layers(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each room's row, 0 at the bottom: one above the highest room it imports.

    The rooms of an import cycle share a row (their arrows, drawn in red, run sideways).
    """
    components = _components(edges)  # Tarjan yields a component after all it reaches
    component_of = {room: n for n, members in enumerate(components) for room in members}
    level: dict[int, int] = {}
    for n, members in enumerate(components):
        below = {component_of[t] for room in members for t in edges[room]} - {n}
        level[n] = 1 + max((level[b] for b in below), default=-1)
    return {room: level[component_of[room]] for room in edges}


def label(room: str, package_dir: Path) -> str:
    """What a box says: ``_output/`` for a subpackage, ``_html.py`` for a module."""
    if room == INIT:
        return "__init__.py"
    return f"{room}/" if (package_dir / room).is_dir() else f"{room}.py"


class Drawing:
    """Rows of boxes, and of the points where long arrows cross a row, ordered and placed.

    The classic layered drawing (Sugiyama): an arrow that spans rows passes through a small
    *dummy* node in each row it crosses; rows are ordered to cross few arrows (barycentres),
    then placed so that arrows run short and long ones straight (least squares, keeping
    each row's order and spacing).
    """

    def __init__(self, edges: dict[str, set[str]], labels: dict[str, str]) -> None:
        self.labels = labels
        self.level = layers(edges)
        top = max(self.level.values(), default=0)
        self.rows: list[list[str]] = [[] for _ in range(top + 1)]  # rows[0] is the top row
        for room in sorted(edges):
            self.rows[top - self.level[room]].append(room)
        self.paths: dict[tuple[str, str], list[str]] = {}  # an arrow's nodes, row by row
        for source in sorted(edges):
            for target in sorted(edges[source]):
                path = [source]
                for row in range(top - self.level[source] + 1, top - self.level[target]):
                    path.append(f"{source}>{target}@{row}")
                    self.rows[row].append(path[-1])
                self.paths[source, target] = [*path, target]
        self.row_of = {node: r for r, row in enumerate(self.rows) for node in row}
        self.above: dict[str, list[str]] = {node: [] for node in self.row_of}
        self.below: dict[str, list[str]] = {node: [] for node in self.row_of}
        for path in self.paths.values():
            for upper, lower in itertools.pairwise(path):
                if self.row_of[upper] != self.row_of[lower]:  # not a cycle's sideways arrow
                    self.below[upper].append(lower)
                    self.above[lower].append(upper)
        self.x: dict[str, float] = {}
        self._order()
        self._place()

    def is_box(self, node: str) -> bool:
        """Whether ``node`` is a room (not where an arrow crosses a row)."""
        return node in self.labels

    def width(self, node: str) -> float:
        """A box's width: its label's, with padding; a dummy node's is small."""
        return len(self.labels[node]) * CHAR_WIDTH + 20 if self.is_box(node) else 4

    def y(self, node: str) -> float:
        """The top of the node's row."""
        return TITLE_HEIGHT + MARGIN + self.row_of[node] * (BOX_HEIGHT + ROW_GAP)

    def _crossings(self) -> int:
        position = {node: i for row in self.rows for i, node in enumerate(row)}
        count = 0
        for row in self.rows:
            pairs = sorted((position[a], position[b]) for a in row for b in self.below[a])
            count += sum(b2 < b1 for i, (_, b1) in enumerate(pairs) for _, b2 in pairs[i + 1 :])
        return count

    def _order(self) -> None:
        """Sweep down and up, sorting each row by its neighbours' mean position; keep the best."""
        best, fewest = [list(row) for row in self.rows], self._crossings()
        for sweep in range(16):
            down = sweep % 2 == 0
            for r in range(1, len(self.rows)) if down else range(len(self.rows) - 2, -1, -1):
                near = self.above if down else self.below
                position = {n: i for i, n in enumerate(self.rows[r - 1 if down else r + 1])}
                now = {n: i for i, n in enumerate(self.rows[r])}
                self.rows[r].sort(key=lambda n: _mean([position[m] for m in near[n]], now[n]))
            crossings = self._crossings()
            if crossings < fewest:
                best, fewest = [list(row) for row in self.rows], crossings
        self.rows = best

    def _gap(self, left: str, right: str) -> float:
        boxes = self.is_box(left) + self.is_box(right)
        return (self.width(left) + self.width(right)) / 2 + (5, 10, 24)[boxes]

    def _place(self) -> None:
        """Each node near the weighted mean of its neighbours, rows kept in order and apart."""
        for row in self.rows:
            x = 0.0
            for i, node in enumerate(row):
                x += self._gap(row[i - 1], node) if i else 0.0
                self.x[node] = x
        for sweep in range(60):
            for row in self.rows if sweep % 2 else reversed(self.rows):
                wanted = []
                for node in row:
                    near = self.above[node] + self.below[node]
                    # Dummies pull hardest: a long arrow runs straight through its rows.
                    weights = [1 + 3 * (not self.is_box(node) + (not self.is_box(n))) for n in near]
                    total = sum(w * self.x[n] for w, n in zip(weights, near, strict=True))
                    wanted.append(total / sum(weights) if near else self.x[node])
                gaps = [self._gap(a, b) for a, b in itertools.pairwise(row)]
                for node, x in zip(row, _spaced(wanted, gaps), strict=True):
                    self.x[node] = x
        left = min(x - self.width(n) / 2 for n, x in self.x.items())
        for node in self.x:
            self.x[node] += MARGIN - left


def _mean(values: list[int] | list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def _spaced(wanted: list[float], gaps: list[float]) -> list[float]:
    """The positions nearest ``wanted`` (least squares) with ``gaps`` kept between neighbours.

    Shifted by the gaps before them, the positions must only grow: pool adjacent violators.
    """
    offsets = [0.0]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    blocks: list[list[float]] = []  # [mean, count]
    for w, offset in zip(wanted, offsets, strict=True):
        blocks.append([w - offset, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, count = blocks.pop()
            before = blocks[-1]
            before[0] = (before[0] * before[1] + mean * count) / (before[1] + count)
            before[1] += count
    flat = [mean for mean, count in blocks for _ in range(int(count))]
    return [y + offset for y, offset in zip(flat, offsets, strict=True)]


def _ports(drawing: Drawing) -> dict[tuple[str, str], list[float]]:
    """Where each arrow leaves its source and reaches its target: spread along the box."""
    ends = {key: [0.0, 0.0] for key in drawing.paths}
    for side, (node_at, next_at) in enumerate(((0, 1), (-1, -2))):
        groups: dict[str, list[tuple[float, tuple[str, str]]]] = {}
        for key, path in drawing.paths.items():  # ordered by where the arrow goes next
            groups.setdefault(path[node_at], []).append((drawing.x[path[next_at]], key))
        for node, arrows in groups.items():
            for i, (_, key) in enumerate(sorted(arrows)):
                share = (i + 1) / (len(arrows) + 1) - 0.5
                ends[key][side] = drawing.x[node] + share * (drawing.width(node) - 16)
    return ends


def svg(edges: dict[str, set[str]], labels: dict[str, str], title: str) -> str:
    """The picture of ``edges`` as a standalone SVG document."""
    drawing = Drawing(edges, labels)
    legend = len(LEGEND) * CHAR_WIDTH * 11 / 13 + MARGIN  # the legend is in 11px
    width = max([x + drawing.width(n) / 2 for n, x in drawing.x.items()] + [legend]) + MARGIN
    height = TITLE_HEIGHT + 2 * MARGIN + len(drawing.rows) * (BOX_HEIGHT + ROW_GAP) - ROW_GAP
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="13">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,1 L10,5 L0,9 z" fill="#333333"/>'
        "</marker></defs>",
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        f'<text x="{MARGIN}" y="{MARGIN + 4}" font-size="14" font-weight="bold" '
        f'fill="#222222">{escape(title)}</text>',
        f'<text x="{MARGIN}" y="{MARGIN + 22}" font-size="11" fill="#555555">'
        f"{escape(LEGEND)}</text>",
    ]
    ports = _ports(drawing)
    sources = sorted(room for room in edges if edges[room])
    colour = {room: PALETTE[i % len(PALETTE)] for i, room in enumerate(sources)}
    for key, path in sorted(drawing.paths.items()):
        out.append(_arrow(drawing, path, ports[key], colour[key[0]]))
    for room in sorted(edges):
        x, y, w = drawing.x[room] - drawing.width(room) / 2, drawing.y(room), drawing.width(room)
        package = labels[room].endswith("/")
        weight = ' font-weight="bold"' if package else ""
        out.append(
            f'<g><rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{BOX_HEIGHT}" rx="5" '
            f'fill="{"#e3ecfa" if package else "#f4f4f4"}" '
            f'stroke="{colour.get(room, "#888888")}" stroke-width="1.5"/>'
            f'<text x="{drawing.x[room]:.1f}" y="{y + BOX_HEIGHT / 2 + 4.5:.1f}" '
            f'text-anchor="middle" fill="#111111"{weight}>{escape(labels[room])}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _arrow(drawing: Drawing, path: list[str], ends: list[float], colour: str) -> str:
    """One arrow, a smooth curve through the rows it crosses; sideways and red in a cycle."""
    source, target = path[0], path[-1]
    cycle = drawing.row_of[source] == drawing.row_of[target]
    style = f'stroke="{colour}" stroke-width="1.1" opacity="0.85"'
    if cycle:
        style = 'stroke="#ff0000" stroke-width="2" stroke-dasharray="6 2"'
    elif source == INIT:
        style += ' stroke-dasharray="4 3"'
    if cycle:  # arching over the row, from top to top
        x1, x2, y = drawing.x[source], drawing.x[target], drawing.y(source)
        lift = 16 + abs(x2 - x1) / 6
        d = f"M{x1:.1f},{y:.1f} C{x1:.1f},{y - lift:.1f} {x2:.1f},{y - lift:.1f} {x2:.1f},{y:.1f}"
    else:
        points = [(ends[0], drawing.y(source) + BOX_HEIGHT)]
        for dummy in path[1:-1]:
            top = drawing.y(dummy)
            points += [(drawing.x[dummy], top), (drawing.x[dummy], top + BOX_HEIGHT)]
        points.append((ends[1], drawing.y(target)))
        d = f"M{points[0][0]:.1f},{points[0][1]:.1f}"
        for (xa, ya), (xb, yb) in itertools.pairwise(points):
            bend = (yb - ya) / 2
            d += f" C{xa:.1f},{ya + bend:.1f} {xb:.1f},{yb - bend:.1f} {xb:.1f},{yb:.1f}"
    what = f"{drawing.labels[source]} imports {drawing.labels[target]}"
    return (
        f'<path d="{d}" fill="none" {style} marker-end="url(#head)">'
        f"<title>{escape(what)}</title></path>"
    )


def write_svg(package_dir: Path, target: Path) -> dict[str, set[str]]:
    """Draw ``package_dir``'s rooms and imports into ``target``; return the edges drawn."""
    edges = room_edges(package_dir)
    labels = {room: label(room, package_dir) for room in edges}
    title = f"{package_dir.name}: the rooms and the imports between them"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(svg(edges, labels, title), encoding="utf-8")
    return edges


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent / "src" / PACKAGE
    picture = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "_static" / "dependencies.svg"
    for room, targets in sorted(write_svg(source, picture).items()):
        print(f"{room:16} → {', '.join(sorted(targets)) or '(nothing of ours)'}")
    print(picture)
