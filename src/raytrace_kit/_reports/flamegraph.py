"""A memray capture rendered as memray's HTML flame graph, shown inline in notebooks."""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from raytrace_kit._html import rename_cells
from raytrace_kit._output.frames import on_call_path
from raytrace_kit.exceptions import ProfileError, ProfileNotFoundError

__all__ = ["FlameGraph", "flamegraph"]


class FlameGraph(type(Path())):  # type: ignore[misc]  # the concrete Path class of this OS
    """The path of a memray HTML flame graph; shows inline in a notebook."""

    def _repr_html_(self) -> str:
        # Cells' code lives in files named by a hash: name them In [n] as tracebacks do.
        text = rename_cells(self.read_text(encoding="utf-8"))
        source = html.escape(text, quote=True)
        return f'<iframe srcdoc="{source}" style="width:100%;height:600px;border:0"></iframe>'


def flamegraph(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Render a memray capture to memray's HTML flame graph.

    Args:
        path: A memray capture (``.bin``), e.g. a call's ``profile_path``.
        out: The HTML file to write (replaced if it exists); default: ``path`` with
            ``.html``.

    Returns:
        The HTML file (displayed inline in a notebook).

    Raises:
        ProfileNotFoundError: ``path`` does not exist (a ``FileNotFoundError``).
        ProfileError: memray could not render the file, its message included (a
            ``RuntimeError``).
    """
    source = Path(path)
    if not source.is_file():
        msg = f"no memray capture at {source}: pass a call's profile_path or a block's p.path."
        raise ProfileNotFoundError(msg)
    target = Path(out) if out is not None else source.with_suffix(".html")
    command = [
        sys.executable,
        "-m",
        "memray",
        "flamegraph",
        "--force",
        "--no-web",  # local assets, not a CDN: renders offline, as on most clusters
        "-o",
        str(target),
        str(source),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        detail = done.stderr.strip() or done.stdout.strip()
        msg = (
            f"memray could not render {source}: {detail}. Pass a memray capture: a call's "
            "profile_path or a block's p.path."
        )
        raise ProfileError(msg)
    with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
        # A page whose data is not as this memray writes it is left as memray made it.
        target.write_text(without_kit_frames(target.read_text(encoding="utf-8")), encoding="utf-8")
    return FlameGraph(target)


# memray embeds the graph as `const packed_data = {...};` (Jinja's tojson).
_PACKED = re.compile(r"(const packed_data = )(\{.*?\})(;\n)", re.DOTALL)


def _spliced(indexes: list[int], children: list[list[int]], kit: set[int]) -> list[int]:
    """``indexes`` with each kit node replaced by its children (again, while they are)."""
    out: list[int] = []
    for index in indexes:
        out.extend(_spliced(children[index], children, kit) if index in kit else [index])
    return out


def without_kit_frames(page: str) -> str:
    """Memray's flame graph page with the kit's frames spliced out of the graph's data.

    The capture starts in the kit's runner (memray records from the frame that entered the
    tracker), so memray draws the runner's line under the root, above the user's function;
    plain code profiled with memray starts at the user's. Each kit node is replaced by its
    children, so the user's functions sit directly under the root with their sizes (the
    root's total still counts what the kit's own frames allocated, which is not drawn).
    """
    found = _PACKED.search(page)
    if found is None:
        return page
    data = json.loads(found[2])
    strings = data["strings"]
    for key in ("nodes", "inverted_no_imports_nodes"):
        nodes = data.get(key)
        if not nodes:
            continue
        kit = {i for i, f in enumerate(nodes["filename"]) if on_call_path(strings[f])}
        if not kit:
            continue
        children = nodes["children"]
        nodes["children"] = [_spliced(row, children, kit) for row in children]
    packed = json.dumps(data, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        packed = packed.replace(char, escaped)  # as Jinja's tojson: safe inside <script>
    return page[: found.start(2)] + packed + page[found.end(2) :]
