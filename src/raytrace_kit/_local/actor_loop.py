"""The event loop of a local async actor: its calls interleave there, as in Ray.

Ray runs every call of an async actor (one with an ``async def`` method) on the actor's
own event loop, up to ``max_concurrency`` (1000) at a time: calls start in submission
order and interleave at each ``await``. A local async actor does the same on a loop of
its own, in a daemon thread: ``.remote()`` schedules the call and returns pending refs at
once, so a call may await the result of a later one without deadlocking.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from raytrace_kit._local import state as local_state

__all__ = ["ActorLoop"]


class ActorLoop:
    """One local async actor's event loop, running in its own daemon thread.

    The thread starts on the actor's first call; a separate thread works from inside a
    running loop too (a notebook, an async test). ``breakpoint()`` works in it.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closing = False  # the actor died: stop when the last call is done

    def _started(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None or loop.is_closed():
            state = local_state.state
            with state.lock:
                loop = self._loop
                if loop is None or loop.is_closed():
                    loop = self._loop = asyncio.new_event_loop()
                    self.closing = False
                    self.thread = threading.Thread(
                        target=_run, args=(loop,), name=f"raytrace_kit-{self._name}", daemon=True
                    )
                    self.thread.start()
                    state.loops.append(loop)
        return loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started if need be)."""
        return self._started()

    def submit(
        self, body: Callable[[], Coroutine[Any, Any, Any]]
    ) -> concurrent.futures.Future[Any]:
        """Schedule ``body()`` as a task on the loop (in submission order); its future.

        The task runs in a copy of the caller's context, as an asyncio task does.
        """
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        loop = self._started()
        made: list[asyncio.Task[Any]] = []

        def start() -> None:
            if future.cancelled():
                return  # cancelled before it started
            task = loop.create_task(_contained(body))
            made.append(task)
            self.tasks.add(task)

            def finished(done: asyncio.Task[Any]) -> None:
                self.tasks.discard(done)
                self._stop_when_idle()
                if future.done():
                    return  # cancelled before it started
                if done.cancelled():
                    future.cancel()
                elif (error := done.exception()) is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result())

            task.add_done_callback(finished)

        def cancel_call() -> None:
            # ray.cancel: a running call gets CancelledError at its await; one not
            # started yet never starts.
            def cancel() -> None:
                if made:
                    made[0].cancel()
                else:
                    future.cancel()

            loop.call_soon_threadsafe(cancel)

        future.cancel_call = cancel_call  # type: ignore[attr-defined]
        loop.call_soon_threadsafe(start)
        return future

    def call(self, body: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run ``body()`` on the loop and wait for its result (from another thread)."""
        if threading.current_thread() is self.thread:
            msg = "a local async actor's loop cannot wait for itself"
            raise RuntimeError(msg)
        return self.submit(body).result()

    def cancel_all(self) -> None:
        """Cancel every running call (the actor died); the loop stops once they are done."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def cancel_then_stop() -> None:
            for task in list(self.tasks):
                task.cancel()
            self._stop_when_idle()

        self.closing = True
        loop.call_soon_threadsafe(cancel_then_stop)

    def _stop_when_idle(self) -> None:
        """Runs in the loop: a dead actor's loop and thread end when its last call has."""
        loop = self._loop
        if self.closing and not self.tasks and loop is not None:
            loop.stop()


def _run(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: run until stopped (the actor died), then release the loop."""
    try:
        loop.run_forever()
    finally:
        try:  # as asyncio.run ends: async generators still suspended are closed first
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _contained(body: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``body``; a ``SystemExit`` or ``KeyboardInterrupt`` out of it would stop the loop.

    The actor handles its own exits; anything else that gets this far fails this call only.
    """
    try:
        return await body()  # made here: a call cancelled before it starts leaves nothing
    except (SystemExit, KeyboardInterrupt) as exc:
        msg = f"a local actor's call ended with {type(exc).__name__}"
        raise RuntimeError(msg) from exc
