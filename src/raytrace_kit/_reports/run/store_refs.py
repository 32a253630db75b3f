"""Object refs that hold the store: held objects by the line that made them, and the finding.

A process's held objects (``_worker/held.py``: its reference table, grouped by the task
that made each object, or by the ``ray.put`` line) are joined here with the
``call.submit`` records, which name each task's line of code and function, and grouped by
line, function and what keeps the objects alive. ``raytrace-kit memory`` shows that now
(:class:`HeldView`); the driver's ``store.held`` records (written when its refs hold most
of the store, or held objects were spilled) give the report its finding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from raytrace_kit._reports.run.by_value import size_text
from raytrace_kit._reports.run.finding import Finding

__all__ = [
    "FULL",
    "NAMED_SHARE",
    "Group",
    "HeldView",
    "group",
    "held_findings",
    "sites_of",
]

FULL = (
    0.8  # held bytes over this share of the store's capacity: the store is full (Ray spills at 80%)
)
NAMED_SHARE = 0.1  # a line is named when its objects are this share of the bytes held, at least
_UNKNOWN = "?"
_FIXES = {
    "local ref": "drop each ref once its result is used (do not keep every ref in a list): "
    "take results as they finish with `ready, refs = ray.wait(refs)` and `ray.get(ready)`, "
    "keep a bounded number in flight, and `del` refs you are done with",
    "used by pending task": "submit in bounded waves: each pending task keeps its argument "
    "objects alive until it ends",
    "captured in object": "an object that holds refs keeps them alive: `del` the ref of the "
    "object (or list) that contains them",
    "put": "`ray.put` a value once and pass that ref to every call; `del` the ref when done",
}


@dataclass(frozen=True)
class Group:
    """Objects held at one line of code, of one function, kept alive the same way."""

    site: str  # file:line of the .remote() or ray.put that made them ("?" if not recorded)
    function: str  # the remote function, or ``ray.put``
    type: str  # what keeps them alive: local ref, used by pending task, captured in object
    count: int
    bytes: int
    spilled_bytes: int = 0


def sites_of(files: Iterable[Path], task_ids: set[str]) -> dict[str, tuple[str, str]]:
    """``task_id -> (site, function)`` of ``task_ids``, from ``call.submit`` lines in ``files``."""
    found: dict[str, tuple[str, str]] = {}
    if not task_ids:
        return found
    for file in files:
        try:
            with file.open("rb") as lines:
                for raw in lines:
                    if b'"call.submit"' not in raw:
                        continue
                    at = raw.find(b'"task_id":"')
                    task = raw[at + 11 : at + 59].decode() if at >= 0 else ""
                    if task not in task_ids or task in found:
                        continue
                    record = json.loads(raw)
                    found[task] = (record.get("site") or _UNKNOWN, record.get("function") or "")
        except (OSError, ValueError):
            continue  # gone while we read, or a line cut short: the others still count
    return found


def group(tables: Sequence[Mapping[str, Any]], sites: Mapping[str, tuple[str, str]]) -> list[Group]:
    """The rows of processes' held tables, by line, function and type: most bytes first."""
    sums: dict[tuple[str, str, str], list[int]] = {}
    for table in tables:
        for row in table.get("rows", []):
            if row.get("site"):
                site, function = row["site"], "ray.put"
            else:
                site, function = sites.get(row.get("task_id") or "", (_UNKNOWN, _UNKNOWN))
            entry = sums.setdefault((site, function, row["type"]), [0, 0, 0])
            entry[0] += row["count"]
            entry[1] += row["bytes"]
            entry[2] += row.get("spilled_bytes", 0)
    made = [Group(s, f, t, c, b, sp) for (s, f, t), (c, b, sp) in sums.items()]
    made.sort(key=lambda g: (-g.bytes, g.site))
    return made


def _short(site: str) -> str:
    """A site under the working directory, relative to it; others as they are."""
    if os.path.isabs(site):
        relative = os.path.relpath(site)
        if not relative.startswith(".."):
            return relative
    return site


@dataclass
class HeldView:
    """What the refs of the cluster's processes hold now (``raytrace-kit memory``)."""

    source: str
    capacity_bytes: int  # the object store's capacity, all nodes
    used_bytes: int | None  # in use now, all nodes (Ray's resource view), if known
    groups: list[Group] = field(default_factory=list)
    processes: int = 0  # processes that answered
    problems: list[str] = field(default_factory=list)

    @property
    def held_bytes(self) -> int:
        """Bytes of the objects the answering processes' refs keep alive."""
        return sum(g.bytes for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        """The view as plain values (JSON)."""
        data = asdict(self)
        data["held_bytes"] = self.held_bytes
        return data

    def __str__(self) -> str:
        lines = [self.headline()]
        lines.extend(f"! {problem}" for problem in self.problems)
        if not self.groups:
            lines.append("No objects held by the refs of processes the kit records.")
            return "\n".join(lines)
        rows = [("line", "function", "objects", "bytes", "spilled", "held as")]
        rows.extend(
            (_short(g.site), g.function, f"{g.count:,}", size_text(g.bytes),
             size_text(g.spilled_bytes) if g.spilled_bytes else "-", g.type)
            for g in self.groups
        )  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines.extend(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
        )
        return "\n".join(lines)

    def headline(self) -> str:
        """One line: the store's use, and what the refs hold."""
        used = "" if self.used_bytes is None else f"{size_text(self.used_bytes)} in use of "
        return (
            f"Object store ({self.source}): {used}{size_text(self.capacity_bytes)}; "
            f"refs of {self.processes} process(es) hold {size_text(self.held_bytes)}"
        )


def held_findings(held: Iterable[bytes]) -> list[Finding]:
    """The refs-hold-the-store finding, from the fullest of the driver's ``store.held`` lines."""
    fullest: dict[str, Any] | None = None
    for raw in held:
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a line cut short
        if fullest is None or record.get("held_bytes", 0) > fullest.get("held_bytes", 0):
            fullest = record
    return [] if fullest is None else _finding(fullest)


def _finding(record: Mapping[str, Any]) -> list[Finding]:
    held, capacity = int(record.get("held_bytes", 0)), int(record.get("capacity_bytes", 0))
    spilled = int(record.get("spilled_bytes", 0))
    if not capacity or (held < FULL * capacity and not spilled):
        return []  # the evidence it needs: a store held full, or held objects spilled
    groups = [Group(**g) for g in record.get("groups", [])]
    named = [g for g in groups if g.bytes >= NAMED_SHARE * held and g.site != _UNKNOWN][:3]
    if not named:
        return []
    first = named[0]
    title = (
        f"Object refs held at {_short(first.site)} kept the object store full: {first.count:,} "
        f"objects of {first.function} ({size_text(first.bytes)}) held as {first.type}"
    )
    lines = "; ".join(
        f"{_short(g.site)} ({g.function}: {g.count:,} objects, {size_text(g.bytes)}, {g.type})"
        for g in named
    )
    evidence = (
        f"at its fullest ({record.get('timestamp', '?')}) the driver's refs held "
        f"{size_text(held)}, {held / capacity:.0%} of the object store ({size_text(capacity)})"
        + (f"; {size_text(spilled)} of it spilled to disk" if spilled else "")
        + f". By line: {lines}"
    )
    fixes = []
    for g in named:
        fix = _FIXES["put"] if g.function == "ray.put" else _FIXES.get(g.type, _FIXES["local ref"])
        if fix not in fixes:
            fixes.append(fix)
    return [Finding(title, evidence, "; ".join(fixes), kind="refs_hold_store", subject=first.site)]
