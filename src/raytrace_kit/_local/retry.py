"""Ray's retry options and ``runtime_env`` env vars, as a local call applies them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ray.exceptions import TaskCancelledError, WorkerCrashedError

__all__ = ["NO_RETRY", "Retry"]


class Retry:
    """Ray's retry options and ``runtime_env`` env vars, as a local call applies them.

    ``retry_exceptions`` (``True`` or a list of exception types) with ``max_retries`` (``-1``:
    no limit) runs a failing call again, as Ray does for a task: only on those exceptions.
    ``runtime_env={"env_vars": ...}`` is set in ``os.environ`` for the call and restored after.
    """

    __slots__ = ("env_vars", "max_retries", "retry_on")

    def __init__(self, ray_options: dict[str, Any]) -> None:
        retries = ray_options.get("max_retries")
        self.max_retries = 3 if retries is None else int(retries)  # Ray's default for tasks
        retry_on = ray_options.get("retry_exceptions") or False
        self.retry_on: bool | tuple[type[BaseException], ...] = (
            tuple(retry_on) if isinstance(retry_on, list | tuple) else bool(retry_on)
        )
        runtime_env = ray_options.get("runtime_env") or {}
        self.env_vars: dict[str, str] = dict(runtime_env.get("env_vars") or {})

    def again(self, error: BaseException, attempt: int) -> bool:
        """Whether a call that raised ``error`` on ``attempt`` (0 first) runs again.

        A crashed worker (``sys.exit()`` in a task) is a system failure: Ray retries it up
        to ``max_retries`` whatever ``retry_exceptions`` says. A cancelled call is not run
        again. Anything else the call's code raised is its own failure, Ray's errors too (a
        child's error re-raised by ``ray.get``, ``RayTaskError(ValueError)``, is a
        ``ValueError``): ``retry_exceptions`` decides, as in Ray. (A failed dependency
        never reaches here: the call does not run.)
        """
        if self.max_retries != -1 and attempt >= self.max_retries:
            return False
        if isinstance(error, WorkerCrashedError):
            return True
        if self.retry_on is False or isinstance(
            getattr(error, "cause", None) or error, TaskCancelledError
        ):
            return False
        return self.retry_on is True or isinstance(error, self.retry_on)

    def environment(self) -> contextlib.AbstractContextManager[None]:
        """``os.environ`` with the call's env vars, restored afterwards."""
        return self._with_env_vars() if self.env_vars else _UNCHANGED

    @contextlib.contextmanager
    def _with_env_vars(self) -> Iterator[None]:
        saved = {key: os.environ.get(key) for key in self.env_vars}
        os.environ.update(self.env_vars)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


NO_RETRY = Retry({"max_retries": 0})
_UNCHANGED = contextlib.nullcontext()  # reusable: the common case of no env vars
