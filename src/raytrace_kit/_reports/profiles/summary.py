"""The headline of one profile: a memray capture's peak and top sites, or cProfile's top."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raytrace_kit._html import card, table, where
from raytrace_kit._reports.profiles.cprofile_table import cpu_stats
from raytrace_kit.exceptions import ProfileError, ProfileNotFoundError

__all__ = ["ProfileSummary", "profile_summary"]


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
