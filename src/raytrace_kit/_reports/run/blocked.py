"""Event loops held by a call: each async method's held turns, summed, and the finding.

An ``async def`` method that blocks (``time.sleep``, a CPU loop, blocking I/O) holds its
actor's event loop; the worker writes a ``call.blocked`` for each turn of 100 ms or more
(:mod:`raytrace_kit._worker.loops`). :class:`BlockedLoops` sums them per method, keeps the
longest turn's line, and merges with another's (a cluster's nodes); it is one of the
report's aggregates, local and merged alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from raytrace_kit._output.schema import Blocked
from raytrace_kit._reports.run.finding import Finding

__all__ = ["FINDING_LONGEST_S", "FINDING_TOTAL_S", "BlockedLoops", "each", "explained"]

# The finding's evidence: turns that held a loop this long in all, over two or more...
FINDING_TOTAL_S = 0.5
# ...or one turn this long (a single first call's imports stay under it).
FINDING_LONGEST_S = 1.0
_MARK = b'"event":"call.blocked"'
FIX = (
    "never block inside async def: await asyncio.sleep() instead of time.sleep(); run "
    "blocking I/O or CPU-bound work off the loop (await asyncio.to_thread(f, ...), or "
    "loop.run_in_executor); or make it a threaded actor (plain def methods, "
    "max_concurrency=N)"
)


_DECODE = msgspec.json.Decoder(Blocked).decode


class BlockedLoops:
    """Each method's held turns: how many, how long in all, the longest, in which actors."""

    def __init__(self, since: str | None = None, until: str | None = None) -> None:
        self.since, self.until = since, until  # the report's window: turns ended in it
        # function -> [turns, held seconds, longest, its where, its source line, actors]
        self.methods: dict[str, list[Any]] = {}

    def line(self, raw: bytes) -> None:
        """Take one ``call.*`` line other than a start or end (others are not ours)."""
        if raw.find(_MARK, 0, 120) < 0:
            return
        try:
            event = _DECODE(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if (self.since and event.timestamp < self.since) or (
            self.until and event.timestamp >= self.until
        ):
            return
        source = str(event.stack[-1][3]) if event.stack and len(event.stack[-1]) > 3 else ""
        self._add(event.function, 1, event.held_s, event.held_s, event.where, source,
                  [event.actor_id] if event.actor_id else [])  # fmt: skip

    def _add(  # noqa: PLR0917 -- the columns of one method's row
        self,
        function: str,
        turns: int,
        held: float,
        longest: float,
        where: str | None,
        source: str,
        actors: Iterable[str],
    ) -> None:
        row = self.methods.setdefault(function, [0, 0.0, 0.0, None, "", set()])
        row[0] += turns
        row[1] += held
        if longest > row[2]:
            row[2], row[3], row[4] = longest, where, source
        row[5].update(actors)

    def to_dict(self) -> dict[str, list[Any]]:
        """As plain data, to merge elsewhere (a node's part of a cluster's report)."""
        return {name: [*row[:5], sorted(row[5])] for name, row in self.methods.items()}

    @classmethod
    def merged(cls, parts: Iterable[dict[str, list[Any]]]) -> BlockedLoops:
        """The sum of several nodes' :meth:`to_dict`."""
        merged = cls()
        for part in parts:
            for name, row in part.items():
                merged._add(name, *row)
        return merged

    def rows(self) -> list[dict[str, Any]]:
        """Each method that held a loop, most held first (the report's section)."""
        rows = [
            {
                "function": name, "turns": row[0], "held_s": round(row[1], 3),
                "longest_s": round(row[2], 3), "where": row[3], "source": row[4],
                "actors": len(row[5]),
            }
            for name, row in self.methods.items()
        ]  # fmt: skip
        rows.sort(key=lambda row: (-row["held_s"], row["function"]))
        return rows

    def findings(self) -> list[Finding]:
        """Methods whose turns held their loop long enough to matter (see the constants)."""
        found = []
        for row in self.rows():
            enough = row["turns"] >= 2 and row["held_s"] >= FINDING_TOTAL_S
            if not enough and row["longest_s"] < FINDING_LONGEST_S:
                continue
            name = ".".join(row["function"].rsplit(".", 2)[-2:])
            at = f" at {row['where']}" if row["where"] else ""
            source = f" (`{row['source']}`)" if row["source"] else ""
            found.append(
                Finding(
                    f"An async method blocks its actor's event loop: {name} held it "
                    f"{row['held_s']:.1f} s in {row['turns']} turn(s), the longest "
                    f"{row['longest_s']:.2f} s{at}",
                    f"while {name} ran{at}{source}, its actor's event loop ran nothing "
                    f"else: every other call of that actor ({row['actors']} actor(s)) "
                    "waited, and calls that await overlapped no more than plain ones",
                    FIX,
                    "blocked_loop",
                    row["function"],
                )
            )
        return found


def explained(findings: list[Finding]) -> list[Finding]:
    """``findings`` less the symptoms of a held loop that a ``blocked_loop`` one names.

    An actor whose async method blocks its loop runs one call at a time and queues the
    rest: "one actor serializes the work" and its methods' "waited in queue" say so, with
    advice (make it async) that does not fit an actor that is async already.
    """
    held = {f.subject.rsplit(".", 1)[0] for f in findings if f.kind == "blocked_loop"}
    if not held:
        return findings
    return [
        f
        for f in findings
        if not (
            (f.kind == "serializing_actor" and f.subject in held)
            or (f.kind == "queued" and f.subject.rsplit(".", 1)[0] in held)
        )
    ]


def each(*takers: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """One callback for ``iter_calls``' other lines that hands each line to every taker."""

    def take(raw: bytes) -> None:
        for taker in takers:
            taker(raw)

    return take
