"""How the kit's objects look in a notebook: one small, consistent, escaped HTML vocabulary.

Every object a user looks at renders as a *card*: a bold title, a one-line summary, then
tables, preformatted text or pictures (inline SVG, built with :func:`element`). Everything
shown is escaped; nothing is fetched from the network (no scripts, no fonts, no
stylesheets: inline styles only).

Code defined in notebook cells lives in files named after a hash of the cell
(``/tmp/ipykernel_<pid>/<hash>.py``); :func:`where` names them as IPython does in
tracebacks, ``In [3]``, when this process runs the kernel that ran the cell.
"""

from __future__ import annotations

import html
import linecache
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "card",
    "cell_name",
    "cell_traceback",
    "code",
    "element",
    "page",
    "pre",
    "rename_cells",
    "table",
    "where",
]

_CARD = (
    "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;"
    "border-left:3px solid #5b7bd5;padding:4px 10px;margin:4px 0"
)
_TABLE = "border-collapse:collapse;margin:4px 0;font-size:12px"
_CELL = "border-bottom:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top"
_PRE = "margin:4px 0;padding:6px;background:rgba(127,127,127,0.08);font-size:12px;overflow:auto"


def card(title: str, summary: str = "", *parts: str) -> str:
    """A titled block: ``title`` and ``summary`` are text (escaped), ``parts`` are HTML."""
    head = f"<b>{html.escape(title)}</b>"
    if summary:
        head += f" &middot; {html.escape(summary)}"
    return f'<div class="raytrace-kit" style="{_CARD}"><div>{head}</div>{"".join(parts)}</div>'


def page(title: str, body: str) -> str:
    """One self-contained page (no scripts, no network) around ``body`` (HTML already)."""
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title></head><body>{body}</body></html>"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], html_columns: int = 0) -> str:
    """A table of text; the last ``html_columns`` columns of each row are HTML already."""
    head = "".join(f'<th style="{_CELL}">{html.escape(h)}</th>' for h in headers)
    body = []
    for row in rows:
        cells = []
        for index, value in enumerate(row):
            is_html = index >= len(row) - html_columns
            shown = str(value) if is_html else html.escape("" if value is None else str(value))
            cells.append(f'<td style="{_CELL}">{shown}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<table style="{_TABLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def pre(text: str) -> str:
    """Preformatted text (a traceback, a stack), escaped."""
    return f'<pre style="{_PRE}">{html.escape(text)}</pre>'


def code(text: str) -> str:
    """Inline code, escaped."""
    return f"<code>{html.escape(text)}</code>"


def element(name: str, *children: str, title: str = "", **attributes: object) -> str:
    """One element (SVG or HTML): attributes and ``title`` escaped, ``children`` markup already.

    ``title`` becomes a ``<title>`` child, the tooltip a browser shows over an SVG shape.
    An attribute ``class_`` is written ``class``, other underscores as hyphens
    (``stroke_width`` is ``stroke-width``); ``None`` leaves an attribute out.

    Example: ``element("circle", cx=4, cy=4, r=2, title="a & b")`` is
    ``<circle cx="4" cy="4" r="2"><title>a &amp; b</title></circle>``.
    """
    shown = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{html.escape(str(value))}"'
        for key, value in attributes.items()
        if value is not None
    )
    inner = (f"<title>{html.escape(title)}</title>" if title else "") + "".join(children)
    return f"<{name}{shown}>{inner}</{name}>"


def _compiler() -> Any:
    """The running IPython's compiler, if this process runs a kernel or an IPython shell."""
    if "IPython" not in sys.modules:  # never import IPython just to ask
        return None
    try:
        from IPython import get_ipython  # noqa: PLC0415

        shell = get_ipython()
    except Exception:
        return None
    return getattr(shell, "compile", None)


def cell_name(filename: str) -> str | None:
    """``In [3]`` for the file of a cell this kernel ran, else ``None``."""
    compiler = _compiler()
    if compiler is None:
        return None
    try:
        named = compiler.format_code_name(filename)
    except Exception:
        return None
    return named[1].replace("In[", "In [") if named else None


def where(filename: str, line: int | str) -> str:
    """``In [3], line 5`` for a cell's code, else ``file.py:5``."""
    cell = cell_name(filename)
    if cell is not None:
        return f"{cell}, line {line}"
    return f"{Path(filename).name}:{line}"


_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<file>[^"]+)", line (?P<line>\d+)(?P<rest>.*)$')


def cell_traceback(text: str) -> str:
    """A traceback with this kernel's cells named as IPython names them, with their code.

    ``File "/tmp/ipykernel_1/123.py", line 5, in f`` becomes ``Cell In [3], line 5, in f``,
    followed by the line's code when the traceback has none (a worker cannot read a cell's
    code; the kernel that ran the cell can).
    """
    if _compiler() is None:
        return text
    lines = text.splitlines()
    shown: list[str] = []
    for index, line in enumerate(lines):
        match = _FRAME.match(line)
        cell = cell_name(match["file"]) if match else None
        if match is None or cell is None:
            shown.append(line)
            continue
        shown.append(f"{match['indent']}Cell {cell}, line {match['line']}{match['rest']}")
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if _FRAME.match(following) or not following.startswith(match["indent"] + "  "):
            code = linecache.getline(match["file"], int(match["line"])).strip()
            if code:
                shown.append(f"{match['indent']}  {code}")
    return "\n".join(shown) + ("\n" if text.endswith("\n") else "")


def rename_cells(text: str) -> str:
    """``text`` with the file names of this kernel's cells replaced by ``In [n]``."""
    compiler = _compiler()
    names = getattr(compiler, "_filename_map", None)
    if not names:
        return text
    for filename, number in names.items():
        if isinstance(filename, str) and filename in text:
            text = text.replace(filename, f"In [{number}]")
    return text
