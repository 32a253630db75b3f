"""Samples in the formats profilers' viewers open: speedscope, folded stacks, pprof.

- **speedscope** (https://www.speedscope.app/file-format-schema.json): one ``sampled``
  profile per process and thread, frames shared, weights in seconds.
- **collapsed** (flamegraph.pl, inferno): one ``frame;frame;frame count`` line per
  distinct stack, outermost first, each frame ``name (file:line)``.
- **pprof** (``go tool pprof``, Pyroscope): a gzipped ``profile.proto``, encoded here by
  hand (a few fields of one message need no protobuf package): values ``samples/count``
  and ``cpu/nanoseconds``, one location per line, labels for the call, the thread and the
  state (and ``driver``, the script, for a driver's samples).
"""

from __future__ import annotations

import gzip
import time
from collections import Counter
from pathlib import Path
from typing import Any

from raytrace_kit._reports.profiles.samples import Frame, SampleRow

__all__ = ["collapsed", "pprof", "speedscope"]

_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(rows: list[SampleRow], name: str = "raytrace_kit samples") -> dict[str, Any]:
    """The speedscope file: one sampled profile per process and thread, in seconds."""
    frames: dict[Frame, int] = {}
    profiles: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r.process, r.thread)):
        stack = [frames.setdefault(frame, len(frames)) for frame in row.stack]
        profile = profiles.get((row.process, row.thread))
        if profile is None:
            profile = profiles[row.process, row.thread] = {
                "type": "sampled",
                "name": f"{_process_name(row)} {row.thread}",
                "unit": "seconds",
                "startValue": 0,
                "endValue": 0.0,
                "samples": [],
                "weights": [],
            }
        profile["samples"].append(stack)
        profile["weights"].append(row.seconds)
        profile["endValue"] += row.seconds
    return {
        "$schema": _SCHEMA,
        "name": name,
        "exporter": "raytrace_kit",
        "activeProfileIndex": 0,
        "shared": {
            "frames": [{"name": f.name, "file": f.file, "line": f.line} for f in frames],
        },
        "profiles": list(profiles.values()),
    }


def _process_name(row: SampleRow) -> str:
    """``node/pid``, or ``driver app.py (node/pid)`` for a driver's samples."""
    if row.driver is None:
        return row.process
    return f"driver {Path(row.driver).name} ({row.process})"


def collapsed(rows: list[SampleRow]) -> str:
    """Folded stacks: ``a;b;c 12`` per distinct stack (outermost first), by samples."""
    folded: Counter[str] = Counter()
    for row in rows:
        if row.stack:
            folded[";".join(f.label.replace(";", ":") for f in row.stack)] += row.count
    return "".join(f"{stack} {count}\n" for stack, count in sorted(folded.items()))


# --- pprof: the protobuf wire format, as much of it as profile.proto's fields need ---


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 negatives as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value) if value else b""


def _bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _packed(field: int, values: list[int]) -> bytes:
    return _bytes(field, b"".join(_varint(v) for v in values)) if values else b""


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        return self.index.setdefault(text, len(self.index))


def pprof(rows: list[SampleRow]) -> bytes:
    """A gzipped pprof ``Profile``: samples with their leaf-first locations and labels."""
    strings = _Strings()
    functions: dict[tuple[str, str], int] = {}
    locations: dict[Frame, int] = {}
    body = bytearray()
    cpu = _int(1, strings("cpu")) + _int(2, strings("nanoseconds"))  # a ValueType
    body += _bytes(1, _int(1, strings("samples")) + _int(2, strings("count"))) + _bytes(1, cpu)
    for row in rows:
        ids = []
        for frame in reversed(row.stack):  # pprof: the leaf first
            location = locations.get(frame)
            if location is None:
                location = locations[frame] = len(locations) + 1
            functions.setdefault((frame.name, frame.file), len(functions) + 1)
            ids.append(location)
        labels = [("thread", row.thread), ("process", row.process),
                  ("state", "waiting" if row.waiting else "running")]  # fmt: skip
        if row.function is not None:
            labels.append(("function", row.function))
        if row.call_id is not None:
            labels.append(("call_id", row.call_id))
        if row.driver is not None:
            labels.append(("driver", row.driver))
        sample = _packed(1, ids) + _packed(2, [row.count, round(row.seconds * 1e9)])
        for key, value in labels:
            sample += _bytes(3, _int(1, strings(key)) + _int(2, strings(value)))
        body += _bytes(2, sample)
    for frame, location in locations.items():
        line = _int(1, functions[frame.name, frame.file]) + _int(2, frame.line)
        body += _bytes(4, _int(1, location) + _bytes(4, line))
    for (name, file), function in functions.items():
        fields = _int(1, function) + _int(2, strings(name)) + _int(3, strings(name))
        body += _bytes(5, fields + _int(4, strings(file)))
    for text in strings.index:  # every string now interned: the table, in index order
        body += _bytes(6, text.encode())
    body += _int(9, time.time_ns())
    body += _bytes(11, cpu)  # period_type
    period = round(1e9 * min((r.seconds / r.count for r in rows if r.count), default=0.01))
    body += _int(12, period)
    return gzip.compress(bytes(body))
