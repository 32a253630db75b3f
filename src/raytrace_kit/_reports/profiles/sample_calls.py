"""What one call's samples say: where a call that has not moved sits, where a straggler's time went.

Both read the rows of :mod:`.samples` by call id and name places as the report does: the
innermost frame of the user's code (:func:`~.samples.user_leaf`), running or waiting.
``raytrace-kit stuck`` asks :func:`recent` on each node (its files, the last seconds);
the report's straggler finding asks :func:`straggler_lines` of the whole run's samples.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.profiles.samples import SAMPLES_GLOB, SampleRow, read_samples, user_leaf

if TYPE_CHECKING:  # the report's findings pass through here; profiles sit below the report
    from raytrace_kit._reports.run.finding import Finding

__all__ = ["RECENT_S", "add_straggler_lines", "recent", "straggler_lines"]

RECENT_S = 10.0  # stuck's window: the samples of the last seconds say where a call sits
# A place: the file, line and function of the user's innermost frame, and whether it waited.
_Place = tuple[str, int, str, bool]


def _places(rows: Iterable[SampleRow]) -> dict[_Place, float]:
    """Seconds of samples at each place."""
    found: dict[_Place, float] = {}
    for row in rows:
        leaf = user_leaf(row.stack)
        if leaf is not None:
            place = (leaf.file, leaf.line, leaf.name, row.waiting)
            found[place] = found.get(place, 0.0) + row.seconds
    return found


def _said(place: _Place) -> str:
    file, line, name, waiting = place
    called = name if name.endswith(">") else f"{name}()"  # <genexpr>, <module>: no ()
    return f"{'waiting' if waiting else 'running'} at {Path(file).name}:{line} in {called}"


def recent(
    roots: Iterable[Path], window_s: float = RECENT_S, now: float | None = None
) -> dict[str, dict[str, Any]]:
    """Each call's samples of the last ``window_s`` seconds in ``roots``' files, summed up.

    Per call id: ``window_s``, ``seconds`` (of samples), ``share`` of them at its most
    frequent place, that place (``where``: ``file:line``, ``function``, ``state``) and
    ``text``: ``in the last 10 s, 100% of its samples (9.8 s) waiting at app.py:41 in
    hold()``.
    """
    since = (time.time() if now is None else now) - window_s
    files = [path for root in roots for path in sorted(Path(root).glob(SAMPLES_GLOB))]
    by_call: dict[str, list[SampleRow]] = {}
    for row in read_samples(files, since=since):
        if row.call_id is not None:
            by_call.setdefault(row.call_id, []).append(row)
    found = {}
    for call_id, rows in by_call.items():
        places = _places(rows)
        total = sum(places.values())
        if not total:
            continue
        place = max(places, key=places.__getitem__)
        share = places[place] / total
        found[call_id] = {
            "window_s": window_s,
            "seconds": round(total, 3),
            "share": round(share, 3),
            "where": f"{place[0]}:{place[1]}",
            "function": place[2],
            "state": "waiting" if place[3] else "running",
            "text": f"in the last {window_s:g} s, {share:.0%} of its samples ({total:.1f} s) "
            + _said(place),
        }
    return found


def straggler_lines(rows: Iterable[SampleRow], function: str, call_id: str) -> str | None:
    """Where call ``call_id`` of ``function`` spent the time its sibling calls did not.

    The place where its samples exceed the siblings' per call the most: ``its samples:
    4.1 s running at app.py:12 in crunch() (82% of them), where its 19 sibling calls
    spent 0.05 s each`` (``None``: the call was not sampled).
    """
    mine: list[SampleRow] = []
    theirs: list[SampleRow] = []
    for row in rows:
        if row.function == function and row.call_id is not None:
            (mine if row.call_id == call_id else theirs).append(row)
    own = _places(mine)
    total = sum(own.values())
    if not total:
        return None
    siblings = len({row.call_id for row in theirs})
    others = _places(theirs)
    each = {place: seconds / siblings for place, seconds in others.items()} if siblings else {}
    place = max(own, key=lambda p: (own[p] - each.get(p, 0.0), own[p]))
    said = f"its samples: {own[place]:.2f} s {_said(place)} ({own[place] / total:.0%} of them)"
    if not siblings:
        return said + "; none of its sibling calls was sampled"
    return f"{said}, where its {siblings} sibling calls spent {each.get(place, 0.0):.2f} s each"


def add_straggler_lines(
    findings: list[Finding], slowest_call: dict[str, str], rows: list[SampleRow]
) -> list[Finding]:
    """``findings`` with each straggler's evidence told where its time went, if sampled.

    ``slowest_call``: each function's slowest call id (the straggler a finding names).
    """
    wanted = [f for f in findings if f.kind == "straggler" and f.subject in slowest_call]
    if not wanted or not rows:
        return findings
    told = {}
    for finding in wanted:
        said = straggler_lines(rows, finding.subject, slowest_call[finding.subject])
        if said is not None:
            told[id(finding)] = replace(finding, evidence=f"{finding.evidence}; {said}")
    return [told.get(id(f), f) for f in findings]
