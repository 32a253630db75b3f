"""Numbers packed small and exact, for what a node ships to the caller: sorted values, keys.

A node's partial report carries per-call numbers (each function's durations, the times
of submissions whose calls started elsewhere). Shipped as 8-byte floats they would be
most of what travels; packed they cost about a third of a byte a duration. The packing
is exact: what is unpacked is the very float the node had, bit for bit, so medians and
percentiles merged on the caller are those of a report over all the files.

- :func:`pack_floats` sorts the values (their order is not kept), writes them as
  integers when they all are: whole microseconds (the kit writes ``duration_s`` with
  six decimals), or whole multiples of a power of two (an epoch second as a float),
  else as raw IEEE bits; then as :func:`pack_ints`.
- :func:`pack_ints` keeps the order: differences in the narrowest fixed width, zlib'd
  (a sorted list's decode in C).
- :func:`task_key` turns a task id into a 64-bit key that every process computes alike
  (``hash()`` of a string differs between processes).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import operator
import struct
import zlib
from array import array
from collections.abc import Iterable, Sequence

__all__ = [
    "pack_floats",
    "pack_ints",
    "pack_keys",
    "task_key",
    "unpack_floats",
    "unpack_ints",
    "unpack_keys",
]

_MICRO, _QUANTUM, _RAW = 0, 1, 2  # how a float array is written (its first byte)
_LEVEL = 6


def task_key(task_id: str) -> int:
    """A task id as a 64-bit key, the same in every process (not Python's ``hash``)."""
    return int.from_bytes(hashlib.blake2b(task_id.encode(), digest_size=8).digest(), "big")


def _varints(values: Iterable[int]) -> bytes:
    out = bytearray()
    append = out.append
    for value in values:
        rest = value
        while rest >= 0x80:
            append((rest & 0x7F) | 0x80)
            rest >>= 7
        append(rest)
    return bytes(out)


def _read_varints(data: bytes) -> list[int]:
    values: list[int] = []
    value = shift = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
        else:
            values.append(value)
            value = shift = 0
    return values


_PLAIN, _ZIGZAG, _VARINT = 0, 1, 2  # how the differences of an int list are written
_WIDTHS = "BHIQ"  # the narrowest array type that holds every difference is used


def pack_ints(values: Sequence[int]) -> bytes:
    """Integers, in their order, as their differences: fixed width, zlib'd.

    Differences that are all positive (a sorted list) decode in C (``array``,
    ``itertools.accumulate``); others are zigzagged; too large ones are varints.
    """
    steps = list(map(operator.sub, values, itertools.chain((0,), values)))
    kind = _PLAIN
    if steps and min(steps) < 0:
        kind, steps = _ZIGZAG, [(s << 1) if s >= 0 else ((-s) << 1) - 1 for s in steps]
    largest = max(steps, default=0)
    for code in _WIDTHS:
        if largest < 256 ** array(code).itemsize:
            data = array(code, steps).tobytes()
            return bytes([kind, _WIDTHS.index(code)]) + zlib.compress(data, _LEVEL)
    return bytes([_VARINT, 0]) + zlib.compress(_varints(steps), _LEVEL)


def unpack_ints(data: bytes) -> list[int]:
    """What :func:`pack_ints` packed, in order."""
    if not data:
        return []
    kind, raw = data[0], zlib.decompress(data[2:])
    if kind == _VARINT:
        steps: Iterable[int] = _read_varints(raw)
    else:
        steps = array(_WIDTHS[data[1]])
        steps.frombytes(raw)
    if kind != _PLAIN:
        steps = [(s >> 1) if not s & 1 else -((s + 1) >> 1) for s in steps]
    return list(itertools.accumulate(steps))


def pack_keys(keys: Sequence[int]) -> bytes:
    """64-bit keys, in their order, 8 bytes each (hashes do not compress)."""
    return array("Q", keys).tobytes()


def unpack_keys(data: bytes) -> list[int]:
    """What :func:`pack_keys` packed."""
    keys = array("Q")
    keys.frombytes(data)
    return keys.tolist()


def _exponent(values: Sequence[float]) -> int | None:
    """The largest ``k`` such that every value is a whole multiple of ``2 ** -k``."""
    deepest = -1075
    for value in values:
        if value == 0.0:
            continue
        if not math.isfinite(value):
            return None
        mantissa, exponent = math.frexp(abs(value))
        bits = int(mantissa * 2**53)  # exact: 53 bits of mantissa
        trailing = (bits & -bits).bit_length() - 1
        deepest = max(deepest, 53 - exponent - trailing)
    return max(deepest, 0)


def pack_floats(values: Iterable[float], *, keep_order: bool = False) -> bytes:
    """Floats packed exactly (see the module): sorted, or in their order if ``keep_order``."""
    ordered = list(values) if keep_order else sorted(values)
    if not ordered:
        return b""
    micro = [round(value * 1e6) for value in ordered]
    if all(m / 1e6 == value for m, value in zip(micro, ordered, strict=True)):
        return bytes([_MICRO]) + pack_ints(micro)
    exponent = _exponent(ordered)
    if exponent is not None and exponent <= 64 and max(map(abs, ordered)) < 2.0 ** (64 - exponent):
        scaled = [int(math.ldexp(value, exponent)) for value in ordered]  # exact: < 2 ** 64
        return bytes([_QUANTUM, exponent]) + pack_ints(scaled)
    raw = array("d", ordered).tobytes()
    return bytes([_RAW]) + zlib.compress(raw, _LEVEL)


def unpack_floats(data: bytes) -> array[float]:
    """What :func:`pack_floats` packed (sorted, or in its order), bit for bit."""
    if not data:
        return array("d")
    kind = data[0]
    if kind == _MICRO:
        return array("d", [m / 1e6 for m in unpack_ints(data[1:])])
    if kind == _QUANTUM:
        exponent = data[1]
        return array("d", [math.ldexp(float(s), -exponent) for s in unpack_ints(data[2:])])
    raw = zlib.decompress(data[1:])
    return array("d", struct.unpack(f"{len(raw) // 8}d", raw))
