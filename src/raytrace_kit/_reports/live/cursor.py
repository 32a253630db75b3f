"""Where each record file of a node's directory was read up to: new lines since the last look.

:class:`Cursor` remembers, per file (by inode, so a rotated file is followed under its
new name), how far it has read, and returns only the complete lines written since; a
look reads at most ``budget`` bytes, so a node with gigabytes already written catches up
over several refreshes instead of stalling one. It lives in the node's reader (an actor:
``_driver/readers.py``) between refreshes; nothing here needs Ray.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["EVENT_FILE", "RECORD_FILE", "Cursor"]

_BUDGET = 32 * 2**20  # bytes read per look, at most: a big backlog is read over several
EVENT_FILE = re.compile(r"^events-.+\.jsonl$")  # each process's calls: what top reads
# Every record the kit writes: each process's events and each driver's own (driver.*).
RECORD_FILE = re.compile(r"^(events|driver)-.+\.jsonl$")


class Cursor:
    """Where each event file of a directory was read up to (see the module).

    ``from_end``: the files there at the first look are taken from their end (``tail``);
    files that appear later are read from their start. ``files``: the names read (event
    files; ``tail`` reads :data:`RECORD_FILE`).
    """

    def __init__(
        self,
        root: Path,
        *,
        from_end: bool = False,
        budget: int = _BUDGET,
        files: re.Pattern[str] = EVENT_FILE,
    ) -> None:
        self.root = root
        self.files = files
        self.budget = budget
        self.from_end = from_end
        self.offsets: dict[int, int] = {}  # inode -> bytes read (up to a line's end)
        self.behind = 0  # bytes written and not read yet (a backlog over the budget)

    def _listing(self) -> list[tuple[str, int, int]]:
        found = []
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return []
        for entry in entries:
            if not self.files.match(entry.name):
                continue
            try:
                info = entry.stat()
            except OSError:
                continue  # rotated away while listing
            found.append((entry.name, info.st_ino, info.st_size))
        found.sort()
        return found

    def read(self) -> list[tuple[str, list[bytes]]]:
        """The complete lines written to each file since the last look, file by file."""
        listing = self._listing()
        first, self.from_end = self.from_end, False
        offsets = {
            inode: self.offsets.get(inode, size if first else 0) for _, inode, size in listing
        }
        self.offsets = offsets
        left, behind, found = self.budget, 0, []
        for name, inode, size in listing:
            start = offsets[inode]
            if size < start:  # rewritten from scratch: read it again
                start = offsets[inode] = 0
            wanted = min(size - start, left)
            behind += size - start - wanted
            if wanted <= 0:
                continue
            try:
                with (self.root / name).open("rb") as handle:
                    handle.seek(start)
                    data = handle.read(wanted)
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            if end == 0:
                continue  # a line still being written: next time
            offsets[inode] = start + end
            left -= end
            found.append((name, data[:end].splitlines()))
        self.behind = behind
        return found
