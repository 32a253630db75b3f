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
from typing import Any

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


# The kit's own threads (the watch thread, the coverage saver): memray tracks every thread,
# and what they allocate while a call is profiled is not the call's. Their entry points, and
# the modules only they run: a thread already running when tracking began is recorded from
# the first function it called after (memray drops the frames on its stack before).
_KIT_THREADS = (
    (os.path.join("raytrace_kit", "_worker", "watch.py"), "_run"),
    (os.path.join("raytrace_kit", "_worker", "coverage.py"), "_save_loop"),
)
_KIT_THREAD_FILES = tuple(
    os.path.join("raytrace_kit", "_worker", name)
    for name in ("watch.py", "snapshot.py", "waits.py", "stack_server.py", "coverage.py")
)


def _kit_threads(nodes: dict[str, list[Any]], strings: list[str]) -> set[int]:
    """The thread labels of the kit's own threads among ``nodes`` (memray's tree)."""
    files, functions, threads = nodes["filename"], nodes["function"], nodes["thread_id"]
    found = {
        threads[i]
        for i in range(len(files))
        for file, name in _KIT_THREADS
        if strings[functions[i]] == name and strings[files[i]].endswith(file)
    }
    tops = nodes["children"][0] if nodes["children"] else []
    return found | {threads[i] for i in tops if strings[files[i]].endswith(_KIT_THREAD_FILES)}


def without_kit_frames(page: str) -> str:
    """Memray's flame graph page with the kit's frames and threads left out of its data.

    The capture starts in the kit's runner (memray records from the frame that entered the
    tracker), so memray draws the runner's line under the root, above the user's function;
    plain code profiled with memray starts at the user's. Each kit node is replaced by its
    children, so the user's functions sit directly under the root with their sizes. The
    kit's own threads (a stuck call's report, a batch of submission records) are left out
    whole. The root's total still counts what both allocated, which is not drawn.
    """
    found = _PACKED.search(page)
    if found is None:
        return page
    data = json.loads(found[2])
    strings = data["strings"]
    # The kit's threads, as memray labels them (string indexes), from the call tree.
    theirs = _kit_threads(data["nodes"], strings) if data.get("nodes") else set()
    for key in ("nodes", "inverted_no_imports_nodes"):
        nodes = data.get(key)
        if not nodes:
            continue
        kit = {i for i, f in enumerate(nodes["filename"]) if on_call_path(strings[f])}
        threads = nodes.get("thread_id") or [None] * len(nodes["filename"])
        gone = {i for i, t in enumerate(threads) if t in theirs}
        children = nodes["children"]
        if gone:
            children = [[i for i in row if i not in gone] for row in children]
        if kit:
            children = [_spliced(row, children, kit) for row in children]
        nodes["children"] = children
    if theirs and "unique_threads" in data:
        data["unique_threads"] = [t for t in data["unique_threads"] if t not in theirs]
    packed = json.dumps(data, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        packed = packed.replace(char, escaped)  # as Jinja's tojson: safe inside <script>
    return page[: found.start(2)] + packed + page[found.end(2) :]
