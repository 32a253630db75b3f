"""Whether a sampled thread is running or waiting, decided from its innermost frame's code.

The sampler sees Python frames only: a thread blocked in C (``time.sleep``, a lock's
``acquire``, ``select``) shows the Python frame that made the call. The rule, in order:

1. The innermost frame is Ray's ``ray.get``/``ray.wait`` (``get_objects``, ``wait``), its
   worker's idle task loop (``main_loop``) or a GCS client call that blocks in C (ray.init
   waiting for its node, ``GlobalState.get_node``; ``_internal_kv_get``): **waiting**.
2. The innermost frame is code of a standard-library module that only wraps blocking
   calls: ``threading`` (``Lock``/``Condition``/``Event``/``Semaphore``, ``join``),
   ``selectors`` (asyncio's idle ``select``), ``queue``, ``subprocess``, ``socket``,
   ``ssl``, ``multiprocessing.connection``, ``concurrent.futures``: **waiting**.
3. The innermost frame is stopped at a call whose callee is named ``sleep``, ``acquire``,
   ``wait``, ``wait_for``, ``select``, ``poll``, ``join``, ``recv``, ``recv_into``,
   ``accept`` or ``waitpid`` (``time.sleep(1)``, ``lock.acquire()``: the name read from the
   call's source text, or from the byte code on Python 3.10; on 3.11 a warm loop's call
   of C stops at its ``PRECALL``), or at a ``with`` statement
   entering a context manager written in C (a lock): **waiting**.
4. Anything else is **running**: Python byte code, or a C function that computes (numpy).

A thread waiting for the GIL counts as running (nothing in its frames says otherwise);
C code that blocks under another name (a gRPC read) counts as running too. Each decision
is cached by (code, instruction), so a thread seen at the same place costs a dict lookup.
"""

from __future__ import annotations

import dis
import functools
import linecache
import os
import re
import threading
from types import CodeType, FrameType

from raytrace_kit import _registry
from raytrace_kit._ray_compat.waiting import waits_in_ray

__all__ = ["BLOCKING_CALLS", "is_waiting"]

BLOCKING_CALLS = frozenset(
    {"sleep", "acquire", "wait", "wait_for", "select", "poll", "join", "recv", "recv_into",
     "accept", "waitpid"}
)  # fmt: skip
_STDLIB = os.path.dirname(threading.__file__) + os.sep
_WAITING_MODULES = tuple(
    _STDLIB + name
    for name in (
        "threading.py",
        "selectors.py",
        "queue.py",
        "subprocess.py",
        "socket.py",
        "ssl.py",
        os.path.join("multiprocessing", "connection.py"),
        os.path.join("concurrent", "futures", ""),
    )
)
_WITH_ENTER = frozenset({"BEFORE_WITH", "SETUP_WITH", "BEFORE_ASYNC_WITH"})
_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME"})
# Python 3.11 calls a C function from PRECALL once the call is specialized (a warm loop's
# ``time.sleep(0.01)``): a thread blocked there stops at PRECALL, not CALL.
_CALLS = ("CALL", "PRECALL")
_CALLEE = re.compile(r"\s*([\w.]+)\s*\(")


def is_waiting(frame: FrameType) -> bool:
    """Whether a thread whose innermost frame is ``frame`` waits (see the module's rule)."""
    return _decide(frame.f_code, frame.f_lasti)


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=65_536)  # places in the code: enough for any program's loops
def _decide(code: CodeType, lasti: int) -> bool:
    if waits_in_ray(code):
        return True
    if code.co_filename.startswith(_WAITING_MODULES):
        return True
    instruction = _instructions(code).get(lasti)
    if instruction is None:
        return False
    if instruction.opname in _WITH_ENTER:
        return True
    if not instruction.opname.startswith(_CALLS):
        return False
    return _callee(code, instruction) in BLOCKING_CALLS


def _callee(code: CodeType, call: dis.Instruction) -> str | None:
    """The last dotted part of the called name: from the call's source, else its byte code."""
    positions = getattr(call, "positions", None)  # Python 3.11+
    if positions is not None and positions.lineno is not None:
        text = linecache.getline(code.co_filename, positions.lineno)
        if text:
            found = _CALLEE.match(text, positions.col_offset or 0)
            if found:
                return found.group(1).rsplit(".", 1)[-1]
    before = [i for i in _instructions(code).values() if i.offset < call.offset]
    for instruction in reversed(before[-8:]):  # the callable is loaded just before its args
        if instruction.opname in _LOADS:
            return str(instruction.argval)
    return None


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=512)
def _instructions(code: CodeType) -> dict[int, dis.Instruction]:
    return {instruction.offset: instruction for instruction in dis.get_instructions(code)}
