"""Large data passed by value: the same object copied into many calls, a remote function's bulk.

Ray copies each argument that is not an ``ObjectRef`` into the call: one over 100 KiB
goes into the object store at each ``.remote()``. The ``call.submit`` records name the
arguments of a MiB or more (``large_args``: where, bytes, which object, its type) and the
size a remote function was pickled to when it is that large (``code_bytes``). Kept here
while the report streams, per object seen (its process, its serial: a few hundred bytes
each, at most :data:`MAX_OBJECTS`) and per function, then judged:

- **the same object passed to many calls** (:data:`PASSED_MIN_CALLS` or more, its copies
  beyond the first :data:`COPIED_MIN_BYTES` or more): one ``ray.put`` would have stored it
  once;
- **a remote function of** :data:`CODE_MIN_BYTES` **or more**: its closure or globals,
  shipped to and kept by every worker that runs it.

An object is known by the process that passed it and a serial that process gave it while
it lived, so the copies of one object are all in that process's file, on one node: a
cluster's nodes each count their own, and the counts add up (:meth:`ByValue.add`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from raytrace_kit._output.schema import Submitted
from raytrace_kit._reports.run.finding import Called, Finding

__all__ = [
    "CODE_MIN_BYTES",
    "COPIED_MIN_BYTES",
    "MAX_OBJECTS",
    "PASSED_MIN_CALLS",
    "ByValue",
    "size_text",
]

# The same object in two calls is one copy too many; whether it matters is the bytes.
PASSED_MIN_CALLS = 2
# The copies beyond the first, together: up to a tenth of a second of copying into the
# object store here (docs/investigate.md has the figures), and a few percent of a default
# object store (30% of the memory of a machine of a few GiB). Less costs nothing you see.
COPIED_MIN_BYTES = 100 * 2**20
# Ray's own warning threshold for a pickled function (FUNCTION_SIZE_WARN_THRESHOLD,
# 10**7 bytes; it refuses one of 10**8): below it, each worker's copy is small beside the
# worker's own memory (100 MiB or more).
CODE_MIN_BYTES = 10**7
MAX_OBJECTS = 100_000  # objects counted; each later one is counted only if known already
MAX_FINDINGS = 5  # objects named, the most bytes copied first
_NAMED = 3  # a finding's lines of calls named in its title, the rest counted


class _Who(msgspec.Struct, gc=False):
    node_id: str | None = None
    worker_id: str | None = None
    pid: int | None = None


_WHO = msgspec.json.Decoder(_Who).decode


def size_text(count: int) -> str:
    """Bytes for a reader: ``20 MiB``, ``1.5 MiB``, ``9.3 GiB``."""
    if count >= 2**30:
        return f"{count / 2**30:.1f} GiB"
    if count >= 10 * 2**20:
        return f"{count / 2**20:.0f} MiB"
    return f"{count / 2**20:.1f} MiB"


class ByValue:
    """The large arguments and functions of the submissions read (see the module).

    ``objects``: ``(process, serial)`` -> ``[bytes, type, where, calls, copies, by line,
    whether the driver passed it, pid]``, ``by line`` counting its calls per ``(function,
    site)``; ``code``: each function's largest pickled size and its calls.
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, int], list[Any]] = {}
        self.code: dict[str, list[int]] = {}

    def take(self, record: Submitted, raw: bytes) -> None:
        """Count what one ``call.submit`` (``raw``, decoded as ``record``) passed by value.

        Never raises: the record's other parts (its time in queue) count whatever this says.
        """
        if isinstance(record.code_bytes, int):
            known = self.code.get(record.function)
            if known is None:
                self.code[record.function] = [record.code_bytes, 1]
            else:
                known[0] = max(known[0], record.code_bytes)
                known[1] += 1
        if not record.large_args:
            return
        try:
            who = _WHO(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        process = who.worker_id or f"{who.node_id}:{who.pid}"
        counted: set[int] = set()  # an object passed twice to one call: one call, two copies
        for entry in record.large_args:
            if not isinstance(entry, list) or len(entry) < 4:
                continue
            where, size, serial, kind = entry[:4]
            if not isinstance(serial, int) or not isinstance(size, int):
                continue  # no serial: an object that cannot be told from a new one
            key = (process, serial)
            passed = self.objects.get(key)
            if passed is None:
                if len(self.objects) >= MAX_OBJECTS:
                    continue
                passed = self.objects[key] = [
                    size, str(kind), where, 0, 0, {}, record.parent_call_id is None, who.pid,
                ]  # fmt: skip
            passed[0] = max(passed[0], size)
            passed[4] += 1
            if serial not in counted:
                counted.add(serial)
                passed[3] += 1
                line = (record.function, record.site)
                passed[5][line] = passed[5].get(line, 0) + 1

    def merge(self, other: ByValue) -> None:
        """Add what ``other`` counted (submissions read after these): every object's counts."""
        for function, (size, calls) in other.code.items():
            known = self.code.setdefault(function, [0, 0])
            known[0], known[1] = max(known[0], size), known[1] + calls
        for key, (size, kind, where, calls, copies, lines, *rest) in other.objects.items():
            passed = self.objects.get(key)
            if passed is None:
                if len(self.objects) >= MAX_OBJECTS:
                    continue
                passed = self.objects[key] = [size, kind, where, 0, 0, {}, *rest]
            passed[0] = max(passed[0], size)
            passed[3] += calls
            passed[4] += copies
            for line, count in lines.items():
                passed[5][line] = passed[5].get(line, 0) + count

    def summary(self) -> dict[str, Any]:
        """What a node sends for a cluster's report: the objects of two calls or more."""
        return {
            "objects": [
                [key[0], key[1], *passed[:5], list(passed[5].items()), *passed[6:]]
                for key, passed in self.objects.items()
                if passed[3] >= PASSED_MIN_CALLS
            ],
            "code": self.code,
        }

    def add(self, parts: Iterable[dict[str, Any]]) -> None:
        """Take in the nodes' :meth:`summary` answers (an object's counts add up)."""
        for part in parts:
            for function, (size, calls) in part["code"].items():
                known = self.code.setdefault(function, [0, 0])
                known[0], known[1] = max(known[0], size), known[1] + calls
            for process, serial, size, kind, where, calls, copies, lines, *rest in part["objects"]:
                passed = self.objects.setdefault(
                    (process, serial), [size, kind, where, 0, 0, {}, *rest]
                )
                passed[0] = max(passed[0], size)
                passed[3] += calls
                passed[4] += copies
                for called, count in lines:
                    line = tuple(called)  # (function, site), a list if it travelled as JSON
                    passed[5][line] = passed[5].get(line, 0) + count

    def findings(self) -> list[Finding]:
        """The same object copied into many calls; remote functions that are large."""
        found: list[tuple[int, Finding]] = []
        for passed in self.objects.values():
            size, _, _, calls, copies, _, _, _ = passed
            if calls >= PASSED_MIN_CALLS and (copies - 1) * size >= COPIED_MIN_BYTES:
                found.append((copies * size, _passed_finding(passed)))
        found.sort(key=lambda item: -item[0])
        made = [finding for _, finding in found[:MAX_FINDINGS]]
        for function, (size, calls) in sorted(self.code.items(), key=lambda item: -item[1][0]):
            if size >= CODE_MIN_BYTES:
                made.append(_code_finding(function, size, calls))
        return made


def _passed_finding(passed: list[Any]) -> Finding:
    size, kind, where, calls, copies, lines, by_driver, pid = passed
    ordered = sorted(lines.items(), key=lambda item: (-item[1], item[0][0], item[0][1] or ""))
    (function, site), _ = ordered[0]
    at = f" at {site}" if site else ""
    if len(ordered) == 1:
        whose = f"{calls:,} calls of {function}{at}"
    else:
        named = [
            f"{count:,} of {name}" + (f" at {line}" if line else "")
            for (name, line), count in ordered[:_NAMED]
        ]
        if len(ordered) > _NAMED:
            named.append(f"{len(ordered) - _NAMED} more lines")
        whose = f"{calls:,} calls ({', '.join(named)})"
    argument = f"argument {where}" if isinstance(where, int) else f"keyword argument {where}"
    passer = "the driver" if by_driver else f"a worker's call (pid {pid})"
    return Finding(
        f"The same {size_text(size)} {kind} was passed by value to {whose}: Ray stored "
        f"{copies:,} copies ({size_text(copies * size)}); ray.put it once and pass the ref",
        f"{passer} passed one {size_text(size)} {kind} ({argument}), the same live object "
        f"each time, to {calls:,} calls: Ray copies each argument that is not an ObjectRef "
        "into the object store at every .remote() (one over 100 KiB is not inlined in the "
        f"call), so {copies - 1:,} of the {copies:,} copies ({size_text((copies - 1) * size)}) "
        "held data stored already. An array refilled in place between calls looks the "
        "same: then the copies are needed",
        "ref = ray.put(x) once, before the loop, and pass ref in its place: Ray hands each "
        "call the value (the function does not change), read from the object store without "
        "a copy on the same node for numpy arrays, and the store holds one copy",
        "passed_by_value",
        function,
        tuple(Called(name, count) for (name, _), count in ordered),
    )


def _code_finding(function: str, size: int, calls: int) -> Finding:
    return Finding(
        f"The remote function {function} captures {size_text(size)} (its closure or the "
        "globals it uses), which Ray ships to every worker that runs it",
        f"Ray pickled {function} to {size_text(size)} at its first .remote() ({calls:,} "
        "calls recorded): a function's pickle carries the variables of its closure and, "
        "for a function defined in __main__ or a notebook, the globals it uses. Each worker "
        "process that runs it fetches and unpickles its own copy, kept in that process's "
        "memory (Ray warns from 10 MB, FUNCTION_SIZE_WARN_THRESHOLD, and refuses from "
        "100 MB)",
        "put the large object in the object store once and pass the ref as an argument "
        "(ref = ray.put(x); f.remote(ref, ...): the workers of a node share one copy), or "
        "build it inside the task (read it from a file)",
        "large_function",
        function,
        (Called(function, calls),),
    )
