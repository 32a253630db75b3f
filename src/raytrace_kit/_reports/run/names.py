"""Each call's id, kept by its function while a report streams: 8 bytes a call.

A report names a call by its id only at the end (a parent whose calls waited on their
children one at a time), and a parent may be read before or after its children. So each
call's id is kept, under its function: appended as it goes by (the report's hot loop: one
append), then packed (a few thousand ids at a time, in C: ``bytes.fromhex``) as 8 bytes
each. Names are looked up all at once, in one scan of the packed ids: no file is read
again, and the work is one step per call however many parents there are. Ids that are
not 16 hex digits (another writer's) are kept in a dict.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable

__all__ = ["CallNames"]

_ID_LENGTH = 16  # the kit's call ids: 10 hex digits of the process, 6 of its counter
PACK_EVERY = 2**14  # ids appended between two packs: their strings are freed by packing


class CallNames:
    """Each call's function by its id (see the module): :meth:`ids_of`, then :meth:`names_of`."""

    __slots__ = ("others", "packed", "pending")

    def __init__(self) -> None:
        self.pending: dict[str, list[str]] = {}  # function -> ids appended since the last pack
        self.packed: dict[str, array[int]] = {}  # function -> ids as numbers (8 bytes each)
        self.others: dict[str, str] = {}  # ids of another shape -> function

    def ids_of(self, function: str) -> list[str]:
        """The list to append ``function``'s call ids to (until the next :meth:`pack`)."""
        ids = self.pending.get(function)
        if ids is None:
            ids = self.pending[function] = []
            self.packed[function] = array("Q")
        return ids

    def pack(self) -> None:
        """Pack the ids appended so far as numbers, 8 bytes each."""
        for function, ids in self.pending.items():
            if ids:
                _pack(ids, function, self.packed[function], self.others)
                ids.clear()

    def merge(self, other: CallNames) -> None:
        """Add ``other``'s ids (packed) to these."""
        other.pack()
        for function, ids in other.packed.items():
            self.ids_of(function)
            self.packed[function].extend(ids)
        self.others.update(other.others)

    def names_of(self, call_ids: Iterable[str]) -> dict[str, str]:
        """The function of each of ``call_ids`` that was added (one scan of all the ids)."""
        self.pack()
        wanted: dict[int, str] = {}
        found: dict[str, str] = {}
        for call_id in call_ids:
            value = _value(call_id)
            if value >= 0:
                wanted[value] = call_id
            elif call_id in self.others:
                found[call_id] = self.others[call_id]
        if wanted:
            for function, values in self.packed.items():
                for value in [value for value in values if value in wanted]:
                    found[wanted[value]] = function
        return found


def _value(call_id: str) -> int:
    """A call id of the kit's shape (16 hex digits) as a number, else -1."""
    if len(call_id) != _ID_LENGTH:
        return -1
    try:
        packed = bytes.fromhex(call_id)
    except ValueError:
        return -1
    return int.from_bytes(packed, "big") if len(packed) == _ID_LENGTH // 2 else -1


def _pack(ids: list[str], function: str, into: array[int], others: dict[str, str]) -> None:
    """Append ``ids`` to ``into`` as numbers; those of another shape go to ``others``."""
    if set(map(len, ids)) == {_ID_LENGTH}:
        try:
            packed = bytes.fromhex("".join(ids))
        except ValueError:
            packed = b""
        if len(packed) == len(ids) * (_ID_LENGTH // 2):  # fromhex skips spaces: no fewer
            start = len(into)
            into.frombytes(packed)
            if sys.byteorder == "little":  # fromhex wrote them big-endian
                tail = into[start:]
                tail.byteswap()
                into[start:] = tail
            return
    for call_id in ids:  # not all of the kit's shape: one by one
        value = _value(call_id)
        if value >= 0:
            into.append(value)
        else:
            others[call_id] = function
