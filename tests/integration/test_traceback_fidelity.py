"""What users read starts in their code: Ray's error text and profiles, with and without the kit.

A failing call's ``RayTaskError`` text is compared line by line with plain Ray's (the pid and
the address are the only differences allowed); a call's cProfile file lists the user's
function first and none of the kit's.
"""

from __future__ import annotations

import pstats
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import ray

from raytrace_kit import debuggable, open_session

pytestmark = pytest.mark.usefixtures("ray_session")

if sys.version_info < (3, 11):  # a bare raise keeps an edited traceback from 3.11 on
    pytest.skip(
        "Python 3.10 shows the kit's two frames (docs/reliability.md)", allow_module_level=True
    )


def parse(text: str) -> int:
    return int(text)


def parse_items(text: str) -> Iterator[int]:
    yield 1
    yield int(text)


class Parser:
    def parse(self, text: str) -> int:
        return int(text)

    def via_self(self, text: str) -> int:
        return self.parse(text)


class AsyncParser:
    async def parse(self, text: str) -> int:
        return int(text)

    async def items(self, text: str) -> AsyncIterator[int]:
        yield 1
        yield int(text)


def _text(run: Callable[[], Any]) -> list[str]:
    """The error's text as the user reads it, pid and address left out."""
    with pytest.raises(ray.exceptions.RayTaskError) as caught:
        run()
    text = re.sub(r"\(pid=\d+, ip=[^)]*\)", "(pid, ip)", str(caught.value))
    # An async call's future may be done before Ray asks, or not: two lines of the stdlib.
    text = re.sub(r'(concurrent/futures/_base\.py", line )\d+', r"\1N", text)
    return re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()


def _task(wrap: Callable[[Any], Any]) -> list[str]:
    f = wrap(ray.remote(max_retries=0)(parse))
    return _text(lambda: ray.get(f.remote("x")))


def _generator(wrap: Callable[[Any], Any]) -> list[str]:
    f = wrap(ray.remote(max_retries=0)(parse_items))
    return _text(lambda: [ray.get(r) for r in f.remote("x")])


def _method(wrap: Callable[[Any], Any]) -> list[str]:
    actor = wrap(ray.remote(Parser)).remote()
    return _text(lambda: ray.get(actor.parse.remote("x")))


def _method_through_self(wrap: Callable[[Any], Any]) -> list[str]:
    actor = wrap(ray.remote(Parser)).remote()
    return _text(lambda: ray.get(actor.via_self.remote("x")))


def _async_method(wrap: Callable[[Any], Any]) -> list[str]:
    actor = wrap(ray.remote(AsyncParser)).remote()
    return _text(lambda: ray.get(actor.parse.remote("x")))


def _async_generator(wrap: Callable[[Any], Any]) -> list[str]:
    actor = wrap(ray.remote(AsyncParser)).remote()
    return _text(lambda: [ray.get(r) for r in actor.items.remote("x")])


# In the compatibility subset (each Python's tracebacks): a task, a generator, an async method.
_COMPAT_ROWS = (_task, _generator, _async_method)
ROWS = [
    pytest.param(row, marks=pytest.mark.compat if row in _COMPAT_ROWS else ())
    for row in (_task, _generator, _method, _method_through_self, _async_method, _async_generator)
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.__name__.strip("_"))
def test_the_error_text_is_plain_rays(row: Callable[[Callable[[Any], Any]], list[str]]) -> None:
    """Line for line as plain Ray prints it: no frame of the kit's, the user's first."""
    plain = row(lambda remote: remote)
    kit = row(debuggable)
    assert kit == plain
    assert not [line for line in kit if "raytrace_kit" in line]
    assert any("int(text)" in line for line in kit)


def work(n: int) -> int:
    return sum(i * i for i in range(n))


@pytest.mark.compat
def test_a_calls_cprofile_starts_at_the_users_function() -> None:
    """The profile's top entry is the user's function; no row of the kit's is left."""
    f = debuggable(ray.remote(work), profile="cprofile")
    assert ray.get(f.remote(50_000)) == work(50_000)
    (call,) = [c for c in open_session().calls(function="work") if c.profile_path][-1:]
    stats = pstats.Stats(str(call.profile_path))
    table: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    assert not [key for key in table if "raytrace_kit" in key[0]]
    top = max(table.items(), key=lambda item: item[1][3])  # the largest cumulative time
    assert top[0][2] == "work"
    assert top[0][0] == __file__
