"""``call.start`` and ``call.end`` as the boundary writes them: one f-string each, on the hot path.

A call's two lines are the kit's hot path. Each is one f-string whose fixed parts are
literals, with the call's shared members spliced in (:func:`.encode.call_members`,
rendered once per call, where the function's and the process's parts are rendered once)
and the time of day inline: no helper called per line. (An f-string measured faster than a
``%`` template, and as fast as msgspec's encoder on Structs, which cannot splice the members
in and writes floats in another form: ``benchmarks/call_lines.py``.) The bytes are exactly
those of :func:`.encode.call_line` with :func:`.encode.memory_members` or
:func:`.encode.end_members`, which stay the schema's one definition
(``tests/unit/test_call_lines.py`` compares the two, byte for byte); what these lines do not
render (a memory figure unknown, a failed call) goes through those.
"""

from __future__ import annotations

import time

from raytrace_kit._output import encode
from raytrace_kit._output import state as output_state

__all__ = ["end_line", "start_line"]

_state = output_state.state  # never rebound: its reset clears it in place
_time = time.time
_SCHEMA = encode.SCHEMA
# The microseconds, zero-padded: "%06d" (which truncates, as int() does) takes half the
# time of an f-string's {int(x):06d}, measured; a name, so the template stays one f-string.
_MICROS = "%06d"


def start_line(
    fragment: str, rss: int | None, private: int | None, max_rss: int | None, tail: str = ""
) -> bytes:
    """A ``call.start`` line: the call's members, then its memory figures and ``tail``."""
    if rss is None or private is None or max_rss is None:
        tail = encode.memory_members((rss, private, max_rss)) + tail
        return encode.call_line("call.start", "info", fragment, tail)
    current = _time()
    second = int(current)
    clock = _state.clock
    day = clock[1] if clock[0] == second else encode.second_text(second)
    return (
        f'{{"timestamp":"{day}.{_MICROS % ((current - second) * 1e6)}+00:00","level":"info",'
        f'"event":"call.start","schema":{_SCHEMA},{fragment},"rss_bytes":{rss},'
        f'"rss_minus_shr_bytes":{private},"max_rss_bytes":{max_rss}{tail}}}\n'
    ).encode("utf-8", "backslashreplace")


def end_line(  # noqa: PLR0917 -- its one caller's, in the order the line has them
    fragment: str,
    duration_s: float,
    error: BaseException | None,
    cpu_s: float | None,
    process_cpu_s: float | None,
    figures: tuple[int | None, int | None, int | None],
    rss_start: int | None,
    tail: str = "",
) -> bytes:
    """A ``call.end`` line: outcome, clocks and memory figures (as :func:`.encode.end_members`).

    ``tail`` follows them: a failed call's locals, a profile's members, a batch's sizes.
    """
    rss, private, max_rss = figures
    if error is not None or rss is None or private is None or max_rss is None or rss_start is None:
        members = encode.end_members(
            duration_s,
            error,
            cpu_s,
            rss_start=rss_start,
            figures=figures,
            process_cpu_s=process_cpu_s,
        )
        level = "info" if error is None else "error"
        return encode.call_line("call.end", level, fragment, members + tail)
    current = _time()
    second = int(current)
    clock = _state.clock
    day = clock[1] if clock[0] == second else encode.second_text(second)
    cpu = "null" if cpu_s is None else f"{cpu_s:.6f}"
    process = "null" if process_cpu_s is None else f"{process_cpu_s:.6f}"
    return (
        f'{{"timestamp":"{day}.{_MICROS % ((current - second) * 1e6)}+00:00","level":"info",'
        f'"event":"call.end","schema":{_SCHEMA},{fragment},"duration_s":{duration_s:.6f},'
        f'"cpu_s":{cpu},"process_cpu_s":{process},"status":"ok","rss_bytes":{rss},'
        f'"rss_minus_shr_bytes":{private},"max_rss_bytes":{max_rss},'
        f'"rss_start_bytes":{rss_start}{tail}}}\n'
    ).encode("utf-8", "backslashreplace")
