"""Reading profiles: summaries of memray and cProfile files, flame graphs, merged CPU tables."""

from __future__ import annotations

import html
import os
import pstats
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raytrace_kit._html import card, rename_cells, table, where
from raytrace_kit.exceptions import ProfileError, ProfileNotFoundError

__all__ = [
    "CpuStats",
    "FlameGraph",
    "ProfileSummary",
    "cpu_stats",
    "flamegraph",
    "profile_summary",
]


@dataclass(frozen=True)
class ProfileSummary:
    """The headline of one profile.

    Attributes:
        kind: ``memray`` or ``cprofile``.
        path: The file summarized.
        peak_memory_bytes: memray: the peak of memory held by tracked allocations.
        top: memray: the allocation sites holding the most memory at the peak
            (``function``, ``file``, ``line``, ``size_bytes``, ``allocations``, and
            ``callers``: up to three calls that led there, innermost first); cProfile:
            the functions with the most cumulative time (``function``, ``file``, ``line``,
            ``calls``, ``cumulative_s``, ``total_s``).
    """

    kind: str
    path: Path
    peak_memory_bytes: int | None
    top: tuple[dict[str, Any], ...]

    def __str__(self) -> str:
        lines = [f"{self.kind} profile {self.path}"]
        if self.kind == "memray":
            lines.append(f"peak memory: {_bytes(self.peak_memory_bytes or 0)}")
            for row in self.top:
                lines.append(
                    f"  {_bytes(row['size_bytes']):>10}  {row['allocations']:>8} allocs  "
                    f"{row['function']} ({where(row['file'], row['line'])})"
                )
                callers = row.get("callers") or ()
                if callers:
                    chain = " <- ".join(f"{f} ({where(p, n)})" for f, p, n in callers)
                    lines.append(f"{'':>32}called from {chain}")
        else:
            for row in self.top:
                lines.append(
                    f"  {row['cumulative_s']:9.4f}s cum {row['total_s']:9.4f}s own "
                    f"{row['calls']:>7} calls  {row['function']} "
                    f"({where(row['file'], row['line'])})"
                )
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``, not the fields."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        if self.kind == "memray":
            rows = [
                (
                    _bytes(r["size_bytes"]), r["allocations"], r["function"],
                    where(r["file"], r["line"]),
                    " <- ".join(f"{f} ({where(p, n)})" for f, p, n in r.get("callers") or ()),
                )
                for r in self.top
            ]  # fmt: skip
            headers = ("held at peak", "allocations", "function", "where", "called from")
            summary = f"peak {_bytes(self.peak_memory_bytes or 0)}, {self.path.name}"
            return card("memray profile", summary, table(headers, rows))
        rows = [
            (r["calls"], f"{r['total_s']:.4f}", f"{r['cumulative_s']:.4f}", r["function"],
             where(r["file"], r["line"]))
            for r in self.top
        ]  # fmt: skip
        headers = ("calls", "own s", "cum s", "function", "where")
        return card("cProfile profile", self.path.name, table(headers, rows))


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover -- the loop always returns


def profile_summary(path: str | os.PathLike[str], top: int = 10) -> ProfileSummary:
    """The headline of a memray capture (``.bin``) or a cProfile file (``.prof``).

    Args:
        path: A profile file, e.g. a call's ``profile_path`` or a block's ``p.path``.
        top: How many allocation sites (memray) or functions (cProfile) to list.

    Returns:
        A :class:`ProfileSummary`: memray's peak and top allocation sites at the peak, or
        the functions with the most cumulative time.

    Raises:
        ProfileNotFoundError: ``path`` does not exist (a ``FileNotFoundError``).
        ProfileError: ``path`` is not a profile file (a ``RuntimeError``).
    """
    file = Path(path)
    if not file.is_file():
        msg = f"no profile file at {file}: pass a call's profile_path or a block's p.path."
        raise ProfileNotFoundError(msg)
    if file.suffix == ".prof":
        try:
            stats = cpu_stats([file], top=top)
        except (OSError, ValueError, TypeError, EOFError) as exc:  # what pstats raises
            msg = f"{file} is not a cProfile file ({type(exc).__name__}: {exc})."
            raise ProfileError(msg) from exc
        return ProfileSummary("cprofile", file, None, tuple(stats.rows()))
    import memray  # noqa: PLC0415

    try:
        reader = memray.FileReader(str(file))
    except Exception as exc:
        msg = (
            f"{file} is not a memray capture or a cProfile .prof file ({exc}): pass a call's "
            "profile_path or a block's p.path."
        )
        raise ProfileError(msg) from exc
    try:
        records = sorted(
            reader.get_high_watermark_allocation_records(merge_threads=True),
            key=lambda r: r.size,
            reverse=True,
        )[:top]
        rows = []
        for record in records:
            frames = record.stack_trace(max_stacks=4)
            function, filename, line = frames[0] if frames else ("<no Python frame>", "-", 0)
            rows.append(
                {
                    "function": function,
                    "file": filename,
                    "line": line,
                    "size_bytes": record.size,
                    "allocations": record.n_allocations,
                    # The calls that led there, innermost first: (function, file, line).
                    "callers": tuple((f[0], f[1], f[2]) for f in frames[1:]),
                }
            )
        return ProfileSummary("memray", file, int(reader.metadata.peak_memory), tuple(rows))
    finally:
        reader.close()


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
