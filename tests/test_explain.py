"""explain(): real errors from ray.get, each explained, linked to the failing call's record."""

from __future__ import annotations

import os
import signal
import time

import pytest
import ray
from ray.exceptions import ActorDiedError, GetTimeoutError, WorkerCrashedError

import raytrace_kit
from raytrace_kit import debuggable, explain


@debuggable
@ray.remote
def parse_row(text: str) -> int:
    return int(text)


@debuggable
@ray.remote(max_retries=0)
def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@debuggable
@ray.remote
class Holder:
    def ping(self) -> str:
        return "pong"


@ray.remote
def sleeper() -> None:
    time.sleep(30)


@pytest.mark.usefixtures("ray_session")
class TestExplain:
    def test_task_error_links_the_call_and_its_traceback(self) -> None:
        with pytest.raises(ValueError, match="invalid literal") as raised:
            ray.get(parse_row.remote("seven"))
        explained = explain(raised.value)
        assert explained.kind == "ValueError in a task"
        assert explained.call is not None
        assert explained.call.function.endswith("parse_row")
        text = str(explained)
        assert "    return int(text)" in text  # the failing line, from the call's record
        assert "local_mode(post_mortem=True)" in text
        assert "<pre>" in explained._repr_html_()

    def test_worker_death(self) -> None:
        with pytest.raises(WorkerCrashedError) as raised:
            ray.get(killed.remote())
        text = str(explain(raised.value))
        assert text.startswith("Worker died:")
        assert "OOM killer (exit 137, SIGKILL)" in text
        assert "interrupted" in text

    def test_killed_actor(self) -> None:
        holder = Holder.remote()
        ray.get(holder.ping.remote())
        ray.kill(holder)
        deadline = time.monotonic() + 60
        while True:  # ray.kill takes effect asynchronously
            try:
                ray.get(holder.ping.remote(), timeout=60)
            except ActorDiedError as died:
                error = died
                break
            assert time.monotonic() < deadline, "the killed actor still answers"
            time.sleep(0.2)
        explained = explain(error)
        assert explained.kind == "Actor died"
        assert "ray.kill" in explained.what

    def test_timeout(self) -> None:
        ref = sleeper.remote()
        with pytest.raises(GetTimeoutError) as raised:
            ray.get(ref, timeout=0.1)
        ray.cancel(ref, force=True)
        explained = explain(raised.value)
        assert explained.kind == "Timed out"
        assert any("stacks(" in item for item in explained.check)


def test_kit_errors_and_unknown_ones() -> None:
    """The kit's own errors and anything else still get an answer."""
    explained = explain(raytrace_kit.LocalModeError("plain call in strict mode"))
    assert (explained.kind, explained.what) == ("LocalModeError", "plain call in strict mode")
    assert explain(KeyError("k")).kind == "KeyError"
