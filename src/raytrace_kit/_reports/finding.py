"""Finding: one problem a report found in the records, with its evidence and its fix."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding"]


@dataclass(frozen=True)
class Finding:
    """One problem the records show: what, the evidence, and the fix.

    ``kind`` names the rule for machines (``tiny_tasks``, ``one_at_a_time``,
    ``serializing_actor``, ``leak``, ``cpu_oversubscription``, ``flaky_retries``, and
    ``death_<cause>``); ``subject`` is the function, actor or process it is about.
    """

    title: str
    evidence: str
    fix: str
    kind: str = ""
    subject: str = ""
