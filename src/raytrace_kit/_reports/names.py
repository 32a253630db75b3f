"""Each call's function by its call id, kept while a report streams: 4 bytes a call.

The kit's call ids are a process's prefix (10 hex digits, drawn once per process) and a
counter (6 hex digits, counting that process's calls: ``_process.new_call_id``). Per
prefix, an array holds each call's function number at its counter's place, so a parent
is named from memory whichever the report read first, its process or its children's: no
file is read again. Ids of another shape (another writer's), and counters too far apart
for an array (a long-lived process whose older files rotated away), go in a dict.
"""

from __future__ import annotations

from array import array

__all__ = ["CallNames"]

_ID_LENGTH = 16
_SLACK = 1024  # places kept below a prefix's first counter: calls that ended later
_SPARSE = 8  # an array at most this many places per call recorded (plus _FREE)...
_FREE = 2**16  # ...beyond which the calls go in the dict


class _Places:
    """One prefix's calls: the function number of counter ``base + i`` at place ``i``."""

    __slots__ = ("base", "calls", "numbers")

    def __init__(self, counter: int) -> None:
        self.base = max(counter - _SLACK, 0)
        self.calls = 0
        self.numbers: array[int] = array("I")

    def put(self, counter: int, number: int) -> bool:
        """Record a call; ``False`` when the array would be too sparse for it."""
        numbers = self.numbers
        at = counter - self.base
        if at < 0:  # a call that started before any seen so far: room below
            lower = max(counter - max(len(numbers), _SLACK), 0)
            if not self._roomy(len(numbers) + self.base - lower):
                return False
            numbers[0:0] = array("I", bytes(4 * (self.base - lower)))
            self.base, at = lower, counter - lower
        elif at >= len(numbers):
            if not self._roomy(at + 1):
                return False
            grown = max(at + 1, 2 * len(numbers))  # doubling: appends cost O(1) each
            numbers.frombytes(bytes(4 * (grown - len(numbers))))
        numbers[at] = number
        self.calls += 1
        return True

    def _roomy(self, places: int) -> bool:
        return places <= _SPARSE * (self.calls + 1) + _FREE

    def get(self, counter: int) -> int:
        at = counter - self.base
        return self.numbers[at] if 0 <= at < len(self.numbers) else 0


class CallNames:
    """Each call's function by its call id (see the module): add them, then ask."""

    __slots__ = ("functions", "last", "last_prefix", "numbers", "others", "places")

    def __init__(self) -> None:
        self.functions: list[str] = [""]  # by number; 0: no call there
        self.numbers: dict[str, int] = {}
        self.places: dict[int, _Places] = {}  # by prefix (the id's value >> 24)
        self.last = _Places(0)  # the prefix of the call added last: most often the next's
        self.last_prefix = -1
        self.others: dict[str, str] = {}

    def add(self, call_id: str, function: str) -> None:
        """Record that ``call_id`` is a call of ``function`` (the report's hot loop)."""
        number = self.numbers.get(function)
        if number is None:
            number = self.numbers[function] = len(self.functions)
            self.functions.append(function)
        value = _value(call_id)
        if value < 0:
            self.others[call_id] = function
            return
        if value >> _COUNTER_BITS == self.last_prefix:  # the process's own call, in place
            places = self.last
            at = (value & _COUNTER_MASK) - places.base
            if 0 <= at < len(places.numbers):
                places.numbers[at] = number
                places.calls += 1
                return
        prefix = value >> _COUNTER_BITS
        known = self.places.get(prefix)
        if known is None:
            known = self.places[prefix] = _Places(value & _COUNTER_MASK)
        self.last, self.last_prefix = known, prefix
        if not known.put(value & _COUNTER_MASK, number):
            self.others[call_id] = function

    def get(self, call_id: str) -> str | None:
        """The function of ``call_id``, or ``None`` if no such call was added."""
        value = _value(call_id)
        places = self.places.get(value >> _COUNTER_BITS) if value >= 0 else None
        number = places.get(value & _COUNTER_MASK) if places is not None else 0
        return self.functions[number] if number else self.others.get(call_id)


_COUNTER_BITS = 24  # the last 6 hex digits
_COUNTER_MASK = (1 << _COUNTER_BITS) - 1


def _value(call_id: str) -> int:
    """A call id of the kit's shape (16 hex digits) as a number, else -1."""
    if len(call_id) != _ID_LENGTH or not call_id.isalnum():  # int() takes "+", "_", " "
        return -1
    try:
        return int(call_id, 16)
    except ValueError:
        return -1
