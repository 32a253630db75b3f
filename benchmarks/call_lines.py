"""Rendering a call's two lines: the schema's renderers, an f-string template, a % one, msgspec.

Issue 43, part 3: each record encoded with one call. Every variant renders the
``call.start`` and ``call.end`` of one call (an actor method that returned, figures known)
from the call's values, as the boundary has them, in one process, timed in the thread's CPU
time, interleaved in rotating order, the median of --rounds printed with a noise floor
(the f-string variant twice):

  encode's renderers   call_members, call_line with memory_members and with end_members:
                       the boundary's path before part 3 (and the schema's one definition)
  f-string             call_members, then call_lines.start_line / end_line: one f-string
                       each, fixed parts literal, the time of day inline (what the kit uses)
  f-string, lines only the two f-strings alone: in the kit the call's members are rendered
                       anyway, when its ids are captured (get_logger() events use them too)
  % template           the same lines from one %-format of a template per function, its
                       fixed parts (function, mode, ids) rendered once
  msgspec Struct       two msgspec Structs (every field of each line), one encode each
                       (floats as msgspec writes them: shortest repr, not 6 decimals), the
                       time of day as the f-string's

Before timing, each line is checked: the f-string's and the % template's are byte for byte
the renderers'; msgspec's decode to the same members in the same order (floats within 1e-6).

Run: python benchmarks/call_lines.py [--calls 20000] [--rounds 9]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import msgspec
from _call_structs import End, Start
from _harness import arguments

from raytrace_kit._output import call_lines, encode
from raytrace_kit._process import ProcessIdentity

IDENTITY = ProcessIdentity("02000000", "8d" * 28, "3f" * 28, 48213, is_worker=True)
SPEC = encode.members({"function": "app.tokenize.Tokenizer.encode", "kind": "actor_method"})
CALL = ("a3f09c1d2e000017", "5c0b0e6e32ac8cf5a7fc8a5a02000000" + "1a" * 8, "Tokenizer.encode")
ACTOR = "5c0b0e6e32ac8cf5a7fc8a5a02000000"
FIGURES = (74375168, 44236800, 74375168)
DURATION, CPU = 0.000123456, 0.000101234


def renderers() -> tuple[bytes, bytes]:
    """The path before part 3: the schema's general renderers."""
    call_id, task_id, name = CALL
    fragment = encode.call_members(
        call_id=call_id,
        spec_fragment=SPEC,
        mode="ray",
        task_id=task_id,
        actor_id=ACTOR,
        identity=IDENTITY,
        attempt=0,
        task_name=name,
    )
    start = encode.call_line("call.start", "info", fragment, encode.memory_members(FIGURES))
    tail = encode.end_members(DURATION, None, CPU, rss_start=FIGURES[0], figures=FIGURES)
    return start, encode.call_line("call.end", "info", fragment, tail)


def f_string() -> tuple[bytes, bytes]:
    """What the boundary does now: the call's members once, one f-string per line."""
    call_id, task_id, name = CALL
    fragment = encode.call_members(
        call_id=call_id,
        spec_fragment=SPEC,
        mode="ray",
        task_id=task_id,
        actor_id=ACTOR,
        identity=IDENTITY,
        attempt=0,
        task_name=name,
    )
    start = call_lines.start_line(fragment, *FIGURES)
    return start, call_lines.end_line(fragment, DURATION, None, CPU, None, FIGURES, FIGURES[0])


_FRAGMENT = encode.call_members(
    call_id=CALL[0],
    spec_fragment=SPEC,
    mode="ray",
    task_id=CALL[1],
    actor_id=ACTOR,
    identity=IDENTITY,
    attempt=0,
    task_name=CALL[2],
)


def f_string_lines() -> tuple[bytes, bytes]:
    """The two f-strings alone: the members are the call's already (its capture renders them)."""
    start = call_lines.start_line(_FRAGMENT, *FIGURES)
    return start, call_lines.end_line(_FRAGMENT, DURATION, None, CPU, None, FIGURES, FIGURES[0])


def percent_templates() -> Callable[[], tuple[bytes, bytes]]:
    """One % template per line for this function and process, fixed parts rendered once."""
    fixed = (
        f'"parent_call_id":null,"parent_task_id":null,{SPEC},"mode":"ray",'.replace("%", "%%")
        + '"task_id":"%s","task_name":%s,"actor_id":"%s",'
        + encode.identity_members(IDENTITY).replace("%", "%%")
        + ',"attempt":%d'
    )
    head = '{"timestamp":"%s.%06d+00:00","level":"info","event":"call.'
    start_t = f'{head}start","schema":2,"call_id":"%s",{fixed},"rss_bytes":%d,' + (
        '"rss_minus_shr_bytes":%d,"max_rss_bytes":%d}\n'
    )
    end_t = f'{head}end","schema":2,"call_id":"%s",{fixed},"duration_s":%.6f,"cpu_s":%.6f,' + (
        '"process_cpu_s":null,"status":"ok","rss_bytes":%d,"rss_minus_shr_bytes":%d,'
        '"max_rss_bytes":%d,"rss_start_bytes":%d}\n'
    )
    state = encode.output_state.state

    def render() -> tuple[bytes, bytes]:
        call_id, task_id, name = CALL
        named = encode._task_name_json(name)  # the renderers own cache
        lines = []
        for template, rest in ((start_t, FIGURES), (end_t, (DURATION, CPU, *FIGURES, FIGURES[0]))):
            current = time.time()
            second = int(current)
            clock = state.clock
            day = clock[1] if clock[0] == second else encode.second_text(second)
            values = (day, (current - second) * 1e6, call_id, task_id, named, ACTOR, 0, *rest)
            lines.append((template % values).encode("utf-8", "backslashreplace"))
        return lines[0], lines[1]

    return render


def msgspec_structs() -> Callable[[], tuple[bytes, bytes]]:
    """Two Structs per call, each encoded by msgspec's C encoder (one call a line).

    The time of day as the f-string's: the clock inline, the date-time once a second.
    """
    dump = msgspec.json.Encoder().encode
    ids = IDENTITY
    function, kind = "app.tokenize.Tokenizer.encode", "actor_method"
    state = encode.output_state.state

    def stamp() -> str:
        current = time.time()
        second = int(current)
        clock = state.clock
        day = clock[1] if clock[0] == second else encode.second_text(second)
        return f"{day}.{'%06d' % ((current - second) * 1e6)}+00:00"  # noqa: UP031 -- as theirs

    def render() -> tuple[bytes, bytes]:
        call_id, task_id, name = CALL
        job, node, worker, pid = ids.job_id, ids.node_id, ids.worker_id, ids.pid
        rss, private, peak = FIGURES
        # Positional, as a hot path would call them: one argument list each.
        start = Start(
            stamp(), "info", "call.start", 2, call_id, None, None, function, kind, "ray",
            task_id, name, ACTOR, job, node, worker, pid, 0, rss, private, peak,
        )  # fmt: skip
        end = End(
            stamp(), "info", "call.end", 2, call_id, None, None, function, kind, "ray",
            task_id, name, ACTOR, job, node, worker, pid, 0, DURATION, CPU, None, "ok", rss,
            private, peak, rss,
        )  # fmt: skip
        return dump(start) + b"\n", dump(end) + b"\n"

    return render


def check(variants: dict[str, Callable[[], tuple[bytes, bytes]]]) -> None:
    """Each variant's lines are the renderers' (msgspec's: the same members and values)."""
    ours = renderers()
    for label, render in variants.items():
        theirs = render()
        for mine, other in zip(ours, theirs, strict=True):
            a, b = json.loads(mine), json.loads(other)
            a.pop("timestamp"), b.pop("timestamp")
            assert list(a) == list(b), f"{label}: other members, or another order"
            for key, value in a.items():
                if isinstance(value, float):
                    assert abs(value - b[key]) < 1e-6, (label, key)
                else:
                    assert value == b[key], (label, key)
            if not label.startswith("msgspec"):  # byte for byte, but for the time of day
                assert mine[70:] == other[70:], label


def main() -> None:
    args = arguments(__doc__, calls=20000, rounds=9)
    variants: dict[str, Callable[[], tuple[bytes, bytes]]] = {
        "encode's renderers": renderers,
        "f-string": f_string,
        "f-string (2)": f_string,
        "f-string, lines only": f_string_lines,
        "% template": percent_templates(),
        "msgspec Struct": msgspec_structs(),
    }
    check(variants)
    samples: dict[str, list[float]] = {label: [] for label in variants}
    labels = list(variants)
    for number in range(args.rounds):
        shift = number % len(labels)
        for label in labels[shift:] + labels[:shift]:
            render = variants[label]
            started = time.thread_time()
            for _ in range(args.calls):
                render()
            samples[label].append((time.thread_time() - started) / args.calls * 1e6)
    medians = {label: statistics.median(values) for label, values in samples.items()}
    base = medians["encode's renderers"]
    print(f"\nA call's two lines rendered, thread CPU (median of {args.rounds} interleaved rounds)")
    for label, value in medians.items():
        print(f"  {label:<22}{value:7.2f} us per call  {value / base:5.2f}x the renderers")
    print(f"  noise floor (f-string twice): {medians['f-string (2)'] / medians['f-string']:.3f}")


if __name__ == "__main__":
    main()
