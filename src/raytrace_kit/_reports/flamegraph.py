"""A memray capture rendered as memray's HTML flame graph, shown inline in notebooks."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

from raytrace_kit._html import rename_cells
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
    return FlameGraph(target)
