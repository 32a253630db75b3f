"""The default source (``reading/session_list.py``): the newest session with kit records, yours.

Session directories are made as Ray names them, in a temp root of the test's own, with
event files written by the kit's writer; "another user's" is a directory chowned to
another uid (the tests run as root where that is possible, and skip it otherwise).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from raytrace_kit import EventsNotFoundError
from raytrace_kit._reports.reading import Choice, choose_latest, sessions
from tests.helpers import EventFile

OTHER_UID = 12345


def _session(root: Path, when: str, calls: int = 0) -> Path:
    """``session_<when>_4242`` under ``root``, with ``calls`` calls (none: no kit records)."""
    path = root / f"session_{when}_000000_4242"
    (path / "logs").mkdir(parents=True)
    if calls:
        events = EventFile(path / "logs" / "raytrace_kit", 100)
        for n in range(calls):
            events.start(f"c{n}", "jobs.load")
            events.end(f"c{n}")
        events.close()
    return path


def _give_away(path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("chown to another uid needs root")
    for place in [path, *path.rglob("*")]:
        os.chown(place, OTHER_UID, OTHER_UID)


class TestChooseLatest:
    """``choose_latest``: newer sessions without records, or not yours, are passed over."""

    def test_newer_ones_without_records_or_of_others_are_skipped(self, tmp_path: Path) -> None:
        """The newest of yours with records, and how many newer ones it passed over."""
        _session(tmp_path, "2026-11-25_09-00-00", calls=1)
        mine = _session(tmp_path, "2026-11-25_10-00-00", calls=2)
        newest = _session(tmp_path, "2026-11-25_11-00-00")
        _give_away(_session(tmp_path, "2026-11-25_12-00-00", calls=3))
        assert choose_latest(tmp_path) == Choice(mine, 1, 1, 2, newest)

    def test_the_newest_is_by_the_time_in_its_name(self, tmp_path: Path) -> None:
        """A session started later is newer, whichever was written to last."""
        newer = _session(tmp_path, "2026-11-25_10-00-00", calls=1)
        older = _session(tmp_path, "2026-11-24_23-59-59", calls=1)
        os.utime(older, (2e9, 2e9))
        assert choose_latest(tmp_path).path == newer

    def test_none_of_yours_says_what_there_is(self, tmp_path: Path) -> None:
        """Nothing to default to: the error says what was found, and what to do."""
        _session(tmp_path, "2026-11-25_11-00-00")
        _give_away(_session(tmp_path, "2026-11-25_12-00-00", calls=3))
        with pytest.raises(EventsNotFoundError) as raised:
            choose_latest(tmp_path)
        assert str(raised.value).startswith(
            f"no Ray session of yours with kit records under {tmp_path} (Ray's temp root; "
            "RAY_TMPDIR moves it): 1 session(s) without kit records, 1 of other users."
        )


class TestSessions:
    """``sessions()``: those with records, newest first, the default marked."""

    def test_listed_newest_first_with_their_counts(self, tmp_path: Path) -> None:
        """Counts per session; the empty one left out but counted; the default is yours."""
        old = _session(tmp_path, "2026-11-25_09-00-00", calls=1)
        mine = _session(tmp_path, "2026-11-25_10-00-00", calls=2)
        _session(tmp_path, "2026-11-25_11-00-00")
        theirs = _session(tmp_path, "2026-11-25_12-00-00", calls=3)
        _give_away(theirs)
        listing = sessions(tmp_path)
        assert [(s.path, s.calls, s.default, s.yours) for s in listing] == [
            (theirs, 3, False, False),
            (mine, 2, True, True),
            (old, 1, False, True),
        ]
        assert listing.without_records == 1
        assert listing.default is listing[1]
        assert listing[0].owner_uid == OTHER_UID
        assert [s.running for s in listing] == [False] * 3  # no Ray process names them
        rows = [line.split() for line in str(listing).splitlines()]
        assert rows[2][:9] == [
            "*",
            mine.name,
            "2026-11-25",
            "10:00:00",
            "ended",
            "1",
            "2",
            "0",
            "root",
        ]

    def test_a_copied_session_keeps_its_name_and_time(self, tmp_path: Path) -> None:
        """A session dir copied elsewhere is still named and dated by its directory."""
        made = _session(tmp_path / "a", "2026-11-25_09-00-00", calls=1)
        copy = tmp_path / "b" / made.name
        shutil.copytree(made, copy)
        (summary,) = sessions(tmp_path / "b")
        assert (summary.name, summary.started.strftime("%H:%M:%S")) == (made.name, "09:00:00")


class TestByName:
    """A session named as ``raytrace-kit sessions`` lists it opens from any directory."""

    def test_a_listed_name_opens_that_session(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The name found under Ray's temp root, not in the working directory."""
        from raytrace_kit._reports.reading import open_session  # noqa: PLC0415

        monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
        _session(tmp_path / "ray", "2026-11-25_09-00-00", calls=1)
        wanted = _session(tmp_path / "ray", "2026-11-25_10-00-00", calls=3)
        monkeypatch.chdir(tmp_path)
        listed = [summary.path.name for summary in sessions()]
        assert wanted.name in listed
        opened = open_session(wanted.name)
        assert opened.root == wanted
        assert len(opened.calls()) == 3

    def test_a_name_that_is_no_session_says_what_to_pass(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Neither a path nor a listed session: the error names what may be passed."""
        from raytrace_kit._reports.reading import open_session  # noqa: PLC0415

        monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
        monkeypatch.chdir(tmp_path)
        with pytest.raises(EventsNotFoundError, match="Pass a Ray session directory"):
            open_session("session_2026-11-25_10-00-00_000000_4242")
