"""Ray's retry options as a local call applies them (``_local.retry``), without Ray.

As Ray documents them: a task is retried up to ``max_retries`` times (3 by default, ``-1``
without limit) when its worker crashes, and on its own exceptions only if
``retry_exceptions`` says so (``True``, or a list of exception types). An actor method is
retried under ``max_task_retries`` (0 by default), which local mode passes to ``Retry`` as
``max_retries``, with the method's ``retry_exceptions``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from ray.exceptions import RayTaskError, TaskCancelledError, WorkerCrashedError

from raytrace_kit._local.retry import NO_RETRY, Retry


class NotFoundError(KeyError):
    """A subclass of a listed type: retried as the listed type is."""


def crashed() -> WorkerCrashedError:
    return WorkerCrashedError()


def childs_error() -> RayTaskError:
    """What the call's ``ray.get`` of a failed child raises: RayTaskError(KeyError)."""
    return RayTaskError("jobs.load", "Traceback...", KeyError("upstream")).as_instanceof_cause()


# (options, error, attempt, runs again): attempt 0 is the first run.
DECISIONS = [
    # Tasks: Ray's defaults, max_retries=3 and retry_exceptions=False.
    pytest.param({}, ValueError("x"), 0, False, id="task default: no retry on exceptions"),
    pytest.param({}, crashed(), 0, True, id="task default: crash retried"),
    pytest.param({}, crashed(), 2, True, id="task default: third crash retried"),
    pytest.param({}, crashed(), 3, False, id="task default: fourth crash not"),
    # retry_exceptions=True: any exception of the call's own, up to max_retries.
    pytest.param(
        {"max_retries": 2, "retry_exceptions": True}, ValueError("x"), 1, True, id="True: 2nd"
    ),
    pytest.param(
        {"max_retries": 2, "retry_exceptions": True}, ValueError("x"), 2, False, id="True: 3rd"
    ),
    pytest.param({"retry_exceptions": True}, ValueError("x"), 2, True, id="True: default max"),
    pytest.param({"retry_exceptions": True}, ValueError("x"), 3, False, id="True: past 3"),
    # retry_exceptions=[types]: only those types (and their subclasses).
    pytest.param({"retry_exceptions": [KeyError]}, KeyError("k"), 0, True, id="list: listed"),
    pytest.param(
        {"retry_exceptions": [KeyError]}, NotFoundError("k"), 0, True, id="list: subclass"
    ),
    pytest.param(
        {"retry_exceptions": [KeyError]}, ValueError("v"), 0, False, id="list: other type"
    ),
    pytest.param(
        {"retry_exceptions": (KeyError, ValueError)}, ValueError("v"), 0, True, id="tuple"
    ),
    pytest.param({"retry_exceptions": False}, ValueError("v"), 0, False, id="False"),
    # max_retries=-1: no limit; 0: never, not even a crash.
    pytest.param(
        {"max_retries": -1, "retry_exceptions": True}, ValueError("x"), 1000, True, id="-1"
    ),
    pytest.param({"max_retries": 0}, crashed(), 0, False, id="0: crash not retried"),
    pytest.param(
        {"max_retries": 0, "retry_exceptions": True}, ValueError("x"), 0, False, id="0: never"
    ),
    # A child's error its code re-raised is the call's own (a KeyError too), as in Ray. A
    # failed dependency never comes here: the call does not run.
    pytest.param({"retry_exceptions": True}, childs_error(), 0, True, id="child's error"),
    pytest.param({"retry_exceptions": [KeyError]}, childs_error(), 0, True, id="child's, listed"),
    pytest.param({"retry_exceptions": [ValueError]}, childs_error(), 0, False, id="child's, not"),
    # A cancelled call is not run again.
    pytest.param({"retry_exceptions": True}, TaskCancelledError(), 0, False, id="cancelled"),
    # Actor methods: max_task_retries (0 unless set) arrives as max_retries.
    pytest.param(
        {"max_retries": 0, "retry_exceptions": True}, ValueError("x"), 0, False, id="actor unset"
    ),
    pytest.param(
        {"max_retries": 2, "retry_exceptions": True}, ValueError("x"), 1, True, id="actor 2"
    ),
    pytest.param(
        {"max_retries": 2, "retry_exceptions": None}, ValueError("x"), 0, False, id="actor no list"
    ),
]


class TestAgain:
    """``Retry.again``: whether a call that raised runs once more."""

    @pytest.mark.parametrize(("options", "error", "attempt", "expected"), DECISIONS)
    def test_the_decision_ray_makes(
        self, options: dict[str, Any], error: BaseException, attempt: int, expected: bool
    ) -> None:
        """The same decision Ray makes for these options, this error, at this attempt."""
        assert Retry(options).again(error, attempt) is expected

    def test_attempts_end_at_max_retries(self) -> None:
        """max_retries=N: N runs again, so N + 1 runs in all."""
        retry = Retry({"max_retries": 4, "retry_exceptions": True})
        attempts = 0
        while retry.again(ValueError("again"), attempts):
            attempts += 1
        assert attempts + 1 == 5

    def test_no_retry_never_runs_again(self) -> None:
        """NO_RETRY (calls Ray never retries) says no even to a crash."""
        assert not NO_RETRY.again(crashed(), 0)
        assert not NO_RETRY.again(ValueError("x"), 0)


class TestEnvironment:
    """``runtime_env={"env_vars": ...}``: set for the call, and only for it."""

    def test_env_vars_are_set_during_the_call_and_removed_after(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A variable the process did not have is there inside, gone after."""
        monkeypatch.delenv("RK_UNIT_RETRY_VAR", raising=False)
        retry = Retry({"runtime_env": {"env_vars": {"RK_UNIT_RETRY_VAR": "on"}}})
        with retry.environment():
            assert os.environ["RK_UNIT_RETRY_VAR"] == "on"
        assert "RK_UNIT_RETRY_VAR" not in os.environ

    def test_a_previous_value_comes_back_also_after_an_error(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The process's own value is restored, even when the call raised."""
        monkeypatch.setenv("RK_UNIT_RETRY_VAR", "mine")
        retry = Retry({"runtime_env": {"env_vars": {"RK_UNIT_RETRY_VAR": "call's"}}})
        seen: list[str] = []

        def call() -> None:
            seen.append(os.environ["RK_UNIT_RETRY_VAR"])
            raise RuntimeError

        with pytest.raises(RuntimeError), retry.environment():
            call()
        assert seen == ["call's"]
        assert os.environ["RK_UNIT_RETRY_VAR"] == "mine"

    @pytest.mark.parametrize(
        "options", [{}, {"runtime_env": None}, {"runtime_env": {"pip": ["x"]}}], ids=repr
    )
    def test_without_env_vars_nothing_changes(self, options: dict[str, Any]) -> None:
        """No env_vars: os.environ is left as it is."""
        before = dict(os.environ)
        with Retry(options).environment():
            assert dict(os.environ) == before
        assert dict(os.environ) == before
