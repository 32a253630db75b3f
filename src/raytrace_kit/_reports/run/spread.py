"""spread(): how one function's call durations spread, as the report's picture draws it.

Computed from the durations the report keeps anyway (sorted once, for its table): the
quartiles, a histogram on one logarithmic grid for all functions, and the stragglers.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call

__all__ = ["BINS_PER_DECADE", "STRAGGLERS_KEPT", "spread"]

BINS_PER_DECADE = 5  # bins of a factor of 10 ** 0.2 (1.58): fine enough to see two humps
STRAGGLERS_KEPT = 20  # a function's slowest stragglers pictured
_SHORTEST = 1e-6  # durations shorter (0.0 among them) count in this one's bin


def spread(
    function: str, durations: list[float], floor: float, slowest: Call | None
) -> dict[str, Any]:
    """A function's sorted ``durations`` as plain data: quartiles, histogram, stragglers.

    Args:
        function: The function's name.
        durations: Its calls' durations in seconds, sorted, at least one.
        floor: How long a call takes to be a straggler (``math.inf``: none is).
        slowest: Its slowest call, whose task and pid name the slowest straggler.

    Returns:
        ``quartiles_s`` (25th percentile, median, 75th percentile), ``p95_s``, ``bins``
        (``[k, calls]`` for each non-empty bin ``k``, which holds durations from
        ``10 ** (k / 5)`` s),
        ``stragglers`` (``[seconds, where]``, the slowest first, at most
        :data:`STRAGGLERS_KEPT`; ``where`` names the slowest's task and pid) and
        ``straggler_floor_s`` (``None`` when there is none).
    """
    count = len(durations)

    def at(share: float) -> float:
        return durations[min(count - 1, int(share * count))]

    beyond = durations[bisect.bisect_left(durations, floor) :][::-1][:STRAGGLERS_KEPT]
    lowest, highest = (_bin(durations[0]), _bin(durations[-1]))
    bins, done = [], 0
    for k in range(lowest, highest + 1):
        edge = 10 ** ((k + 1) / BINS_PER_DECADE)
        upto = count if k == highest else bisect.bisect_left(durations, edge)
        if upto > done:
            bins.append([k, upto - done])
        done = upto
    where = f"task {(slowest.task_id or '?')[:16]}, pid {slowest.pid}" if slowest else ""
    return {
        "function": function,
        "count": count,
        "quartiles_s": [
            at(0.25),
            (durations[(count - 1) // 2] + durations[count // 2]) / 2,
            at(0.75),
        ],
        "p95_s": at(0.95),
        "bins": bins,
        "straggler_floor_s": floor if beyond else None,
        "stragglers": [[took, where if i == 0 else ""] for i, took in enumerate(beyond)],
    }


def _bin(seconds: float) -> int:
    return math.floor(math.log10(max(seconds, _SHORTEST)) * BINS_PER_DECADE)
