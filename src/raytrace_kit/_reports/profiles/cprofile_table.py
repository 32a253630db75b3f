"""cProfile files merged into one table: every call of a function, from every worker."""

from __future__ import annotations

import os
import pstats
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raytrace_kit._html import card, table, where
from raytrace_kit.exceptions import ProfileNotFoundError

__all__ = ["CpuStats", "cpu_stats"]


class CpuStats:
    """cProfile statistics merged from many files (all calls of a function, all workers).

    Attributes:
        stats: The merged ``pstats.Stats``, for everything pstats offers.
        files: The files merged.
    """

    def __init__(self, stats: pstats.Stats, files: list[Path], top: int) -> None:
        self.stats = stats
        self.files = files
        self.top = top

    def rows(self, top: int | None = None) -> list[dict[str, Any]]:
        """The functions with the most cumulative time, as dicts."""
        entries = self.stats.stats  # type: ignore[attr-defined]  # pstats' own table
        ordered = sorted(entries.items(), key=lambda item: item[1][3], reverse=True)
        return [
            {
                "function": name,
                "file": file,
                "line": line,
                "calls": primitive_calls,
                "cumulative_s": cumulative,
                "total_s": total,
            }
            for (file, line, name), (primitive_calls, _n, total, cumulative, _callers) in ordered[
                : top or self.top
            ]
        ]

    def calls(self, function: str) -> int:
        """How many times a function was called, summed over its entries.

        ``function`` is a name as cProfile records it (``nap``), and builtins match by
        their short or dotted name too (``sleep`` or ``time.sleep`` for
        ``<built-in method time.sleep>``).
        """
        return sum(
            row[0]
            for (_f, _l, name), row in self.stats.stats.items()  # type: ignore[attr-defined]
            if _names_match(name, function)
        )

    def __str__(self) -> str:
        lines = [f"cProfile stats merged from {len(self.files)} file(s)"]
        lines.append(f"  {'calls':>8} {'own s':>9} {'cum s':>9}  function")
        for row in self.rows():
            lines.append(
                f"  {row['calls']:>8} {row['total_s']:9.4f} {row['cumulative_s']:9.4f}  "
                f"{row['function']} ({where(row['file'], row['line'])})"
            )
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``, not the fields."""
        printer.text(str(self))

    def __repr__(self) -> str:
        return f"<CpuStats of {len(self.files)} file(s), top {self.top}>"

    def _repr_html_(self) -> str:
        rows = [
            (r["calls"], f"{r['total_s']:.4f}", f"{r['cumulative_s']:.4f}", r["function"],
             where(r["file"], r["line"]))
            for r in self.rows()
        ]  # fmt: skip
        headers = ("calls", "own s", "cum s", "function", "where")
        summary = f"merged from {len(self.files)} file(s)"
        return card("cProfile stats", summary, table(headers, rows))


def _names_match(recorded: str, wanted: str) -> bool:
    if recorded == wanted:
        return True
    if recorded.startswith("<") and recorded.endswith(">"):  # <built-in method time.sleep>
        dotted = recorded[1:-1].rsplit(" ", 1)[-1]
        return dotted == wanted or dotted.endswith(f".{wanted}")
    return False


def cpu_stats(
    paths_or_directory: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], top: int = 20
) -> CpuStats:
    """Merge cProfile files into one view: every call of a function, from every worker.

    Args:
        paths_or_directory: ``.prof`` files, or a directory searched recursively for them
            (e.g. ``log_dir() / "profiles"``).
        top: How many functions the table shows.

    Returns:
        A :class:`CpuStats` (a readable ``str()``, ``_repr_html_``, ``.stats`` for pstats).

    Raises:
        ProfileNotFoundError: No ``.prof`` file was found (a ``FileNotFoundError``).
    """
    if isinstance(paths_or_directory, str | os.PathLike):
        root = Path(paths_or_directory)
        files = sorted(root.rglob("*.prof")) if root.is_dir() else [root]
    else:
        files = [Path(p) for p in paths_or_directory]
    if not files:
        msg = f"no .prof files in {paths_or_directory}"
        raise ProfileNotFoundError(msg)
    stats = pstats.Stats(str(files[0]))
    for file in files[1:]:
        stats.add(str(file))
    return CpuStats(stats, files, top)
