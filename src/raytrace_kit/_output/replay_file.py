"""A failed call's replay file: where it lives, written private, read only while still private.

The file is one JSON header line (what replay needs to find the code: the function, the
run's working directory and import path, what was not kept and why; never an argument's
value), then the cloudpickle of the call's inputs. It is created with mode 0600 in a
directory of mode 0700 (``os.open``: never readable by others, not even for a moment), and
read only when it still is this user's and private: unpickling runs code, so a file that
someone else could have written is refused.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from raytrace_kit._output import paths
from raytrace_kit.exceptions import InvalidValueError, UnsafeReplayFileError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENV_MAX_BYTES",
    "FORMAT",
    "check_private",
    "max_bytes",
    "path_for",
    "read",
    "write",
]

ENV_MAX_BYTES = "RAYTRACE_CAPTURE_MAX_BYTES"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # a call's pickled inputs past this are not kept
FORMAT = 1
_SUBDIR = "replay"
_SUFFIX = ".replay"
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a symlink planted at the path is not followed


def path_for(call_id: str) -> Path:
    """The replay file of the call ``call_id``, in this node's log dir (``replay/``)."""
    return paths.log_dir() / _SUBDIR / f"{paths.sanitize(call_id)}{_SUFFIX}"


def max_bytes() -> int:
    """The cap on a call's pickled inputs: ``RAYTRACE_CAPTURE_MAX_BYTES``, else 64 MiB."""
    text = os.environ.get(ENV_MAX_BYTES, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return DEFAULT_MAX_BYTES


def write(path: Path, header: dict[str, Any], payload: bytes) -> None:
    """Create ``path`` with mode 0600 (and its directory 0700), holding header and payload.

    Raises:
        OSError: The directory or the file cannot be made or written (a file left half
            written is removed).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, _FLAGS | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
            file.write(payload)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def check_private(path: os.PathLike[str] | str, status: os.stat_result | None = None) -> None:
    """Refuse a file that is not this user's regular file, or that others may read or write.

    Args:
        path: The replay file, named in the message.
        status: Its ``os.fstat`` when it is open already (so the file checked is the file
            read); else it is looked up, without following a symlink.

    Raises:
        UnsafeReplayFileError: Why the file cannot be trusted, and the fix.
    """
    status = os.lstat(path) if status is None else status
    if not stat.S_ISREG(status.st_mode):
        msg = f"{path} is not a regular file (a symlink, or a directory): not unpickled."
        raise UnsafeReplayFileError(msg)
    uid = os.getuid() if hasattr(os, "getuid") else status.st_uid
    if status.st_uid != uid:
        msg = (
            f"{path} belongs to user id {status.st_uid}, not to you (user id {uid}): "
            "unpickling it would run whatever its owner put in it. If you trust it, copy "
            "it (`cp FILE mine.replay && chmod 600 mine.replay`) and replay the copy."
        )
        raise UnsafeReplayFileError(msg)
    if status.st_mode & 0o077:
        mode = stat.S_IMODE(status.st_mode)
        msg = (
            f"{path} has mode {mode:04o}: group or others may read or change it, and "
            "unpickling it would run whatever is in it. The kit writes these files 0600; if "
            f"you trust this one, `chmod 600 {path}` and replay again."
        )
        raise UnsafeReplayFileError(msg)


def read(path: os.PathLike[str] | str) -> tuple[dict[str, Any], bytes]:
    """The header and the pickled payload of a replay file, once it is found private.

    Raises:
        FileNotFoundError: There is no such file.
        UnsafeReplayFileError: It is not yours, or others may read or write it.
        InvalidValueError: It is not a replay file (its header does not parse).
    """
    check_private(path)  # first by name: a symlink is named as such, not opened
    descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as file:
        check_private(path, os.fstat(file.fileno()))
        first = file.readline()
        payload = file.read()
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        msg = f"{path} is not a replay file of this raytrace_kit (format {FORMAT})."
        raise InvalidValueError(msg)
    return header, payload
