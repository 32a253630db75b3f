"""Make the docs' pictures from real output: run by the docs build (``nox -s docs``).

- ``_static/report.svg``: ``raytrace-kit report`` of a small synthetic run, as a terminal
  shows it (rich's SVG export of the very text ``str(report)`` gives).

The run is written as the kit writes events (one file per process), with fixed times, so
the picture changes only when the report does. Pictures of a browser (Perfetto, memray's
flame graph) are not made here: no browser is available to the build.

Run: python docs/screenshots.py
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
NODE = "e57b3b9653bf7c6cd73b0d79549f1f865e2781232c72b314dd78b374"


def _events() -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    second = 0.0

    def call(n: int, function: str, seconds: float, **end: object) -> None:
        nonlocal second
        base = {
            "schema": 2, "call_id": f"5f1c2a9b3e{n:06x}", "function": function, "kind": "task",
            "mode": "ray", "task_id": f"{n:016x}" + "ff" * 12 + "01000000", "node_id": NODE,
            "worker_id": "37" * 28, "pid": 3797 + n % 2, "attempt": end.pop("attempt", 0),
        }  # fmt: skip
        start = f"2026-11-22T04:02:{second:09.6f}+00:00"
        second += seconds
        stop = f"2026-11-22T04:02:{second:09.6f}+00:00"
        events.append({"timestamp": start, "level": "info", "event": "call.start", **base,
                       "rss_bytes": 96 * 2**20})  # fmt: skip
        events.append({"timestamp": stop, "level": "info", "event": "call.end", **base,
                       "duration_s": seconds, "status": "ok", "rss_bytes": 97 * 2**20,
                       "rss_start_bytes": 96 * 2**20, **end})  # fmt: skip

    for n in range(30):
        call(n, "jobs.tokenize", 0.002)
    call(30, "jobs.parse_row", 0.01, status="error", error_type="ValueError",
         error="invalid literal for int() with base 10: 'n/a'",
         traceback='Traceback (most recent call last):\n  File "/app/jobs.py", line 12, in '
         "parse_row\n    return int(text)\nValueError: invalid literal for int() with base "
         "10: 'n/a'\n")  # fmt: skip
    call(31, "jobs.fetch", 0.4, attempt=1)
    return events


def report_svg(target: Path) -> None:
    """Write the report of the synthetic run as an SVG of the terminal."""
    from rich.console import Console  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    import raytrace_kit  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "events-e57b3b9653bf-3797.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in _events())
        )
        shown = str(raytrace_kit.report(tmp))
    with Path(os.devnull).open("w") as sink:
        console = Console(record=True, width=110, file=sink)
        console.print(Text("$ raytrace-kit report\n" + shown))
        target.write_text(console.export_svg(title="raytrace-kit report"), encoding="utf-8")


if __name__ == "__main__":
    report_svg(HERE / "_static" / "report.svg")
    print(HERE / "_static" / "report.svg")
