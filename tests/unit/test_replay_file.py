"""Unit tier: the replay file, written private and read only while it is (no Ray started)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from raytrace_kit import InvalidValueError, RaytraceKitError, UnsafeReplayFileError
from raytrace_kit._output import replay_file

HEADER = {"format": replay_file.FORMAT, "function": "shop.checkout", "cwd": "/app"}


@pytest.fixture
def no_umask() -> Iterator[None]:
    """A umask of 0: what the file's own mode gives is all it has."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def _written(tmp_path: Path) -> Path:
    path = tmp_path / "replay" / "c0ffee.replay"
    replay_file.write(path, HEADER, b"\x80\x05pickled")
    return path


class TestWrite:
    """The file is this user's alone from its creation: 0600, in a 0700 directory."""

    @pytest.mark.usefixtures("no_umask")
    def test_modes_without_a_umask(self, tmp_path: Path) -> None:
        path = _written(tmp_path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    def test_header_and_payload_read_back(self, tmp_path: Path) -> None:
        assert replay_file.read(_written(tmp_path)) == (HEADER, b"\x80\x05pickled")

    def test_an_existing_file_is_not_overwritten(self, tmp_path: Path) -> None:
        path = _written(tmp_path)
        with pytest.raises(FileExistsError):
            replay_file.write(path, HEADER, b"other")
        assert replay_file.read(path)[1] == b"\x80\x05pickled"

    def test_a_planted_symlink_is_not_followed(self, tmp_path: Path) -> None:
        target = tmp_path / "target"
        target.write_bytes(b"theirs")
        (tmp_path / "replay").mkdir()
        (tmp_path / "replay" / "c0ffee.replay").symlink_to(target)
        with pytest.raises(FileExistsError):
            _written(tmp_path)
        assert target.read_bytes() == b"theirs"

    def test_the_path_is_named_by_the_call(self) -> None:
        path = replay_file.path_for("c0ffee0000000001")
        assert (path.parent.name, path.name) == ("replay", "c0ffee0000000001.replay")


class TestCheckPrivate:
    """A file others could have written is refused, with the reason and the fix."""

    @pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602, 0o620, 0o666])
    def test_group_or_others_bits_refused(self, tmp_path: Path, mode: int) -> None:
        path = _written(tmp_path)
        path.chmod(mode)
        with pytest.raises(UnsafeReplayFileError) as raised:
            replay_file.read(path)
        assert f"has mode {mode:04o}: group or others may read or change it" in str(raised.value)
        assert f"`chmod 600 {path}`" in str(raised.value)
        assert isinstance(raised.value, PermissionError)
        assert isinstance(raised.value, RaytraceKitError)

    @pytest.mark.parametrize("mode", [0o600, 0o400])
    def test_private_modes_accepted(self, tmp_path: Path, mode: int) -> None:
        path = _written(tmp_path)
        path.chmod(mode)
        replay_file.check_private(path)

    @pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs chown")
    def test_another_users_file_refused(self, tmp_path: Path) -> None:
        path = _written(tmp_path)
        os.chown(path, 54321, -1)
        with pytest.raises(UnsafeReplayFileError, match="belongs to user id 54321, not to you"):
            replay_file.read(path)

    def test_a_symlink_refused(self, tmp_path: Path) -> None:
        link = tmp_path / "link.replay"
        link.symlink_to(_written(tmp_path))
        with pytest.raises(UnsafeReplayFileError, match="is not a regular file"):
            replay_file.read(link)


class TestRead:
    """What is not a replay file says so."""

    def test_not_a_replay_file(self, tmp_path: Path) -> None:
        path = tmp_path / "notes.replay"
        path.write_bytes(b"not json\n")
        path.chmod(0o600)
        with pytest.raises(InvalidValueError, match="is not a replay file"):
            replay_file.read(path)


class TestMaxBytes:
    """The cap: RAYTRACE_CAPTURE_MAX_BYTES in bytes, else 64 MiB."""

    @pytest.mark.parametrize(
        ("value", "cap"),
        [("", 64 * 2**20), ("1000", 1000), ("lots", 64 * 2**20), ("0", 64 * 2**20)],
    )
    def test_the_variable(self, monkeypatch: pytest.MonkeyPatch, value: str, cap: int) -> None:
        monkeypatch.setenv(replay_file.ENV_MAX_BYTES, value)
        assert replay_file.max_bytes() == cap
