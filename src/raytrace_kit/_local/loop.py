"""Async methods of local actors: each call runs to completion on a private event loop."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from raytrace_kit import _process
from raytrace_kit._local import mode
from raytrace_kit._local.mode import LocalConfig
from raytrace_kit._output.context import CURRENT_CALL

__all__ = ["on_private_loop"]


def _private_loop() -> asyncio.AbstractEventLoop:
    """One event loop for local async actors, in a daemon thread.

    A separate thread works from inside a running loop too (a notebook, an async test).
    """
    state = _process.state
    with state.lock:
        loop = state.local_loop
        if loop is None or loop.is_closed():
            loop = state.local_loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="raytrace_kit-local-loop", daemon=True
            )
            thread.start()
        return loop


def on_private_loop(method: Callable[..., Any], config: LocalConfig) -> Callable[..., Any]:
    """Wrap an async method so that calling it runs it to completion on the private loop.

    The call's context (the running call, local mode) is carried into the loop's task by
    hand: ``create_task(context=...)`` needs Python 3.11.
    """

    async def in_context(call: Any, *args: Any, **kwargs: Any) -> Any:
        tokens = (mode.OVERRIDE.set(config), CURRENT_CALL.set(call))
        try:
            result = method(*args, **kwargs)
            if inspect.isasyncgen(result):
                return [item async for item in result]
            return await result
        finally:
            CURRENT_CALL.reset(tokens[1])
            mode.OVERRIDE.reset(tokens[0])

    def call(*args: Any, **kwargs: Any) -> Any:
        running = CURRENT_CALL.get()
        coroutine = in_context(running, *args, **kwargs)
        result = asyncio.run_coroutine_threadsafe(coroutine, _private_loop()).result()
        if inspect.isasyncgenfunction(method):
            return (item for item in result)  # generator items, as for sync generators
        return result

    call.__raytrace_method__ = method  # type: ignore[attr-defined]  # for run.is_generator
    return call
