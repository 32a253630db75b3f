"""A local call's life around the boundary: how an attempt fails, its retries, the post-mortem.

The boundary (:mod:`raytrace_kit._worker.boundary`) records a call's start, outcome and end
in local mode as in a worker; what only local mode does (Ray does it in a cluster) lives
here, shared by sync calls, async actors' calls and streaming generators: an attempt's
failure opens the post-mortem debugger when asked, unless Ray would retry the call, and
failed attempts run again as Ray's retries would.
"""

from __future__ import annotations

import pdb

from raytrace_kit._local.outcome import Outcome
from raytrace_kit._local.retry import Retry
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import CallSpec

__all__ = ["Attempts", "failed", "post_mortem"]


def post_mortem(spec: CallSpec, config: LocalConfig, error: BaseException) -> None:
    """Open pdb at the failing frame if the call or local mode asked for it."""
    if config.post_mortem or spec.options.post_mortem:
        pdb.post_mortem(error.__traceback__)


def failed(  # noqa: PLR0917 -- the attempt's own parts, from two runners alike
    outcome: Outcome,
    error: Exception,
    spec: CallSpec,
    config: LocalConfig,
    retry: Retry | None,
    attempt: int,
) -> None:
    """An attempt raised ``error``: record it; post-mortem on the last attempt only."""
    outcome.error = error
    if retry is None or not retry.again(error, attempt):
        post_mortem(spec, config, error)


class Attempts:
    """The attempts of one call: the first, then one more per failure Ray would retry."""

    __slots__ = ("number", "retry", "task_id", "task_name")

    def __init__(self, retry: Retry) -> None:
        self.retry = retry
        self.number = 0  # the attempt running now, 0 first (the events' ``attempt``)
        # The call's task id, drawn by its first attempt's ids and kept by the others: a
        # retry in Ray is the same task, with the same id (the report joins on it).
        self.task_id: str | None = None
        self.task_name: str | None = None  # .options(name=...): the name Ray gives it

    def again(self, outcome: Outcome) -> bool:
        """Whether the call runs again after ``outcome`` (and count the new attempt)."""
        if outcome.error is None or not self.retry.again(outcome.error, self.number):
            return False
        self.number += 1
        return True
