"""replay(): a failed call found in a run's records and run again, here or in a new process.

``raytrace-kit replay ID`` runs it in a new process (:func:`run_in_child`, this module's
``main`` there), in the run's working directory with its import path, so the command's
own state stays out of it. :func:`replay` runs it in the calling process, for notebooks:
pdb needs the kernel's own stdin, and the exception lands where ``%debug`` finds it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError, ReplayError

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call
    from raytrace_kit._reports.reading import Session

__all__ = ["find_call", "kept_file", "main", "replay", "run_in_child"]

_POST_MORTEM = "`with raytrace_kit.local_mode(post_mortem=True):` around the call"
_CAPTURE = '`raytrace-kit run --capture failures` (or @debuggable(capture="failures"))'


def replay(
    call_id: str, source: str | os.PathLike[str] | Session | None = None, pdb: bool = False
) -> Any:
    """Run a failed call again in this process, in local mode: it raises as it did.

    The call must have been kept: run with ``capture="failures"`` (``raytrace-kit run
    --capture failures``, or ``@debuggable(capture="failures")``). Its code and inputs are
    unpickled here, with the run's ``sys.path`` entries that this process lacks added for
    the call (and removed after); the working directory stays this process's (the
    ``raytrace-kit replay`` command runs it in the run's).

    Args:
        call_id: The call's id, or its Ray task id (a prefix of either will do).
        source: The run's records, as :func:`open_session` takes them (default: the
            newest session on this machine with kit records), or a session.
        pdb: Stop in pdb at the failing line (post-mortem) before the exception is raised.

    Returns:
        The call's result, when it does not fail this time.

    Raises:
        ReplayError: The call's inputs were not kept (the message says why, and what to do).
        UnsafeReplayFileError: Its file is not yours, or others may read or write it.
        EventsNotFoundError: No call of that id in the records.
        InvalidValueError: The id matches several calls.

    Example:
        >>> raytrace_kit.replay("3f9a1c")  # doctest: +SKIP
        ZeroDivisionError: division by zero
    """
    from raytrace_kit._local import replay as local_replay  # noqa: PLC0415 -- imports Ray
    from raytrace_kit._output import replay_file  # noqa: PLC0415
    from raytrace_kit._output.frames import user_frames  # noqa: PLC0415

    path = kept_file(find_call(call_id, source))
    header, _ = replay_file.read(path)
    with local_replay.importable(header.get("sys_path") or []):
        kept = local_replay.load(path)
        try:
            return local_replay.call(kept)
        except BaseException as error:
            error.__traceback__ = user_frames(error.__traceback__, all_kit=True)
            if pdb:
                import pdb as debugger  # noqa: PLC0415

                debugger.post_mortem(error.__traceback__)
            raise


def find_call(ident: str, source: str | os.PathLike[str] | Session | None = None) -> Call:
    """The failed call named by (a prefix of) its call id or task id, its last attempt.

    Raises:
        EventsNotFoundError: No call of that id.
        InvalidValueError: Calls of several tasks match.
        ReplayError: It did not fail (it succeeded, or never ended).
    """
    from raytrace_kit._reports.reading import Session, open_session  # noqa: PLC0415

    session = source if isinstance(source, Session) else open_session(source)
    found = [c for c in session.calls() if _named(c, ident)]
    if not found:
        msg = (
            f"no call {ident!r} in {session.root}: `raytrace-kit events --status error` lists "
            "the failed calls, with their task ids"
        )
        raise EventsNotFoundError(msg)
    tasks = sorted({c.task_id or c.call_id for c in found})
    if len(tasks) > 1:
        shown = ", ".join(tasks[:5]) + (" ..." if len(tasks) > 5 else "")
        msg = f"id {ident!r} matches calls of {len(tasks)} tasks ({shown}): give more of it"
        raise InvalidValueError(msg)
    failed = [c for c in found if c.status == "error"]
    if not failed:
        call = found[-1]
        said = "succeeded" if call.status == "ok" else "never ended (its process died)"
        msg = f"call {call.call_id} of {call.function} {said}: there is no exception to replay."
        raise ReplayError(msg)
    kept = [c for c in failed if c.replay_path]
    return kept[-1] if kept else failed[-1]


def _named(call: Call, ident: str) -> bool:
    return call.call_id.startswith(ident) or (call.task_id or "").startswith(ident)


def kept_file(call: Call) -> Path:
    """The replay file of a failed call, or why it has none and what to do instead.

    Raises:
        ReplayError: Its inputs were not kept: no capture, or they could not be.
    """
    name = f"call {call.call_id} of {call.function}"
    if call.replay_missing:
        msg = (
            f"{name}: its inputs were not kept: {call.replay_missing}. Replay cannot run it; "
            "debug it in this process instead, where pdb stops at the failing line: "
            f"{_POST_MORTEM}."
        )
        raise ReplayError(msg)
    if not call.replay_path:
        msg = (
            f"{name} was not captured: its arguments were not kept, since the run did not ask "
            f"for it. Run it again with {_CAPTURE} to keep a failed call's inputs for replay, "
            f"or debug it in this process, where pdb stops at the failing line: {_POST_MORTEM}."
        )
        raise ReplayError(msg)
    return Path(call.replay_path)


def run_in_child(call: Call, *, pdb: bool = False) -> int:
    """Replay ``call`` in a new process, in the run's working directory; its exit code.

    The file is checked here first (its owner, mode and kind), so a refusal is said before
    anything starts; the child reads it again, checked again.

    Raises:
        ReplayError: As :func:`kept_file`, or an actor's state that was not kept.
        UnsafeReplayFileError: The file is not yours, or others may read or write it.
    """
    from raytrace_kit._output import replay_file  # noqa: PLC0415

    path = kept_file(call)
    header, _ = replay_file.read(path)
    if header.get("method") and header.get("actor_state_missing"):
        from raytrace_kit._local import replay as local_replay  # noqa: PLC0415

        local_replay.load(path)  # raises the ReplayError that says why
    cwd = header.get("cwd")
    if not cwd or not Path(cwd).is_dir():
        gone = f"the run's working directory {cwd} is gone: the replay runs in this one"
        print(f"raytrace-kit replay: {gone}", file=sys.stderr)
        cwd = None
    command = [sys.executable, "-m", __name__, str(path), *(["--pdb"] if pdb else [])]
    return subprocess.run(command, cwd=cwd, check=False).returncode  # noqa: S603 -- our own module


def main(argv: list[str] | None = None) -> int:
    """The replay's own process: the call run again, its traceback printed (exit 1)."""
    parser = argparse.ArgumentParser(prog="raytrace-kit replay (child)")
    parser.add_argument("path")
    parser.add_argument("--pdb", action="store_true")
    arguments = parser.parse_args(argv)

    from raytrace_kit._local import replay as local_replay  # noqa: PLC0415
    from raytrace_kit._output import replay_file  # noqa: PLC0415
    from raytrace_kit._output.frames import user_frames  # noqa: PLC0415
    from raytrace_kit.exceptions import RaytraceKitError  # noqa: PLC0415

    try:
        header, _ = replay_file.read(arguments.path)
        sys.path[:] = [*header.get("sys_path", []), *sys.path]  # the run's order first
        if header.get("program"):  # raytrace-kit run: its plain remotes made debuggable
            from raytrace_kit._driver import program  # noqa: PLC0415

            program.instrument(driver=False)
        kept = local_replay.load(arguments.path)
    except (RaytraceKitError, OSError) as exc:
        print(f"raytrace-kit replay: {exc}", file=sys.stderr)
        return 1
    try:
        local_replay.call(kept)
    except BaseException as error:  # the user's exception, printed: the replay's output
        tb = user_frames(error.__traceback__, all_kit=True)
        traceback.print_exception(type(error), error, tb)
        if arguments.pdb:
            import pdb  # noqa: PLC0415

            pdb.post_mortem(tb)
        return 1
    print(
        f"raytrace-kit replay: {header.get('function')} did not fail this time "
        f"(it raised {header.get('error_type')} in the run)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
