"""``raytrace-kit sessions`` and the line every command prints first, on a million events.

The session is written by ``benchmarks/report.py``'s writer (the kit's own renderer and
``EventWriter``, rotating at 32 MiB) in a Ray temp root of its own (``RAY_TMPDIR``), laid
out as Ray lays out a session: ``ray/session_<time>_<pid>/logs/raytrace_kit``. --calls
calls are 2 events each: 500,000 calls is 1,000,000 events, about 600 MB.

Each variant runs as a fresh process, start-up included (as a user types it), in rotating
order, --rounds times, after one run that warms the page cache:
  sessions            raytrace-kit sessions: every session's calls and failures counted
  sessions (again)    the same, measured apart: the noise floor
  report              raytrace-kit report SESSION: its line counts the calls first
  report --quiet      the same without the line: what the line costs a report
  events --event x    raytrace-kit events SESSION --event none: decoding every event

Run: python benchmarks/machine_sessions.py [--calls 500000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from report import compare, write_and_say  # the writer and comparison of report.py


def variants(session: Path) -> dict[str, list[str]]:
    beside = Path(sys.executable).with_name("raytrace-kit")  # the venv's, even if not on PATH
    command = str(beside) if beside.exists() else shutil.which("raytrace-kit") or "raytrace-kit"
    return {
        "sessions": [command, "sessions"],
        "sessions (again)": [command, "sessions"],
        "report": [command, "report", str(session)],
        "report --quiet": [command, "report", str(session), "--quiet"],
        "events --event x": [command, "events", str(session), "--event", "x", "--quiet"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RAY_TMPDIR"] = tmp  # the commands' temp root: this session only
        session = Path(tmp, "ray", "session_2026-11-25_09-00-00_000000_4242")
        directory = session / "logs" / "raytrace_kit"
        directory.mkdir(parents=True)
        write_and_say(directory, args.calls)
        results = compare(variants(session), args.rounds, "sessions")
        base = statistics.median(r.seconds for r in results["sessions"])
        floor = statistics.median(r.seconds for r in results["sessions (again)"]) / base
        line = statistics.median(r.seconds for r in results["report"]) - statistics.median(
            r.seconds for r in results["report --quiet"]
        )
        print(f"\nnoise floor (sessions again / sessions): {floor:.3f}")
        print(f"what the line costs a report (report - report --quiet): {line:+.2f} s")


if __name__ == "__main__":
    main()
