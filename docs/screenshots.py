"""Make the docs' pictures from real output: run by the docs build (``nox -s docs``).

- ``_static/report.svg``: ``raytrace-kit report`` of a small synthetic run, as a terminal
  shows it (rich's SVG export of the very text ``str(report)`` gives).
- ``_static/report-html.png``: the HTML report (``save_html()``) of a synthetic run of
  four processes, as headless Chromium renders it. Made only where a ``chromium`` binary
  is on PATH (``nox -s browser`` installs Debian's); elsewhere the committed PNG stays.

Each run is written as the kit writes events (one file per process), with fixed times, so
the pictures change only when the report does.

Run: python docs/screenshots.py
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from datetime import datetime, timezone
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


MIB = 2**20
OTHER_NODE = "9c1d2f7a40b86e5513c2aa90f1e6d7b3c48a0e2291f5d6b7c8e9fa0b"
RUN_START = 1795000000.0  # 2026-11-18T11:06:40Z


class _Process:
    """One worker process's event file of the pictured run, written call by call."""

    def __init__(self, directory: Path, node: str, pid: int, rss_mib: float) -> None:
        self.path = directory / f"events-{node[:12]}-{pid}.jsonl"
        self.node, self.pid, self.rss = node, pid, rss_mib * MIB
        self.clock, self.calls = 0.0, 0
        self.lines: list[str] = []

    def call(self, function: str, seconds: float, grow_mib: float = 0.0, **end: object) -> None:
        """A call that starts now, runs ``seconds`` and ends as ``end`` says (ok by default)."""
        self.calls += 1
        call_id = f"{self.pid:06x}{self.calls:010x}"
        base = {
            "schema": 2, "call_id": call_id, "function": function,
            "kind": "actor_method" if ".Cache." in function else "task", "mode": "ray",
            "task_id": f"{self.pid:08x}{self.calls:08x}" + "ab" * 12 + "01000000",
            "node_id": self.node, "worker_id": f"{self.pid:056x}", "pid": self.pid,
            "attempt": 0,
        }  # fmt: skip
        self._line(self.clock, "call.start", base, rss_bytes=int(self.rss))
        if end.pop("never_ends", False):
            self.clock = float("inf")  # the process died during this call
            return
        started, self.clock = self.rss, self.clock + seconds
        self.rss += grow_mib * MIB
        figures = {"rss_bytes": int(self.rss), "rss_start_bytes": int(started),
                   "rss_minus_shr_bytes": int(0.7 * self.rss)}  # fmt: skip
        self._line(self.clock, "call.end", base, duration_s=seconds, **{"status": "ok", **end},
                   **figures)  # fmt: skip
        self.clock += 0.02  # the next task's scheduling

    def _line(self, at: float, event: str, base: dict[str, object], **fields: object) -> None:
        stamp = datetime.fromtimestamp(RUN_START + at, timezone.utc).isoformat(
            timespec="microseconds"
        )
        line = {"timestamp": stamp, "level": "info", "event": event, **base, **fields}
        self.lines.append(json.dumps(line) + "\n")

    def close(self) -> None:
        self.path.write_text("".join(self.lines), encoding="utf-8")


def pictured_run(directory: Path) -> None:
    """Write a 20 s run of four processes with something for each picture to show.

    Shards load in two processes of each of two nodes; one load takes 9 s (a straggler);
    parsing fails now and then; a cache actor keeps everything it is given (its memory
    grows call after call); one process dies in the middle of a parse.
    """
    draw = random.Random(7)  # noqa: S311 -- a picture's run, the same at every build
    bad = {"error_type": "ValueError", "status": "error", "error": "invalid literal for int()",
           "traceback": 'Traceback (most recent call last):\n  File "/app/etl.py", line 31, '
           "in parse_rows\n    total += int(field)\nValueError: invalid literal for int() "
           "with base 10: 'n/a'\n"}  # fmt: skip
    processes = [
        _Process(directory, NODE, 3797, 310),
        _Process(directory, NODE, 3798, 295),
        _Process(directory, OTHER_NODE, 4120, 330),
        _Process(directory, OTHER_NODE, 4121, 240),
    ]
    loaders, cache = processes[:3], processes[3]
    for shard in range(21):
        worker = loaders[shard % 3]
        if worker.clock > 20:
            continue
        slow = shard == 7
        worker.call("etl.load_shard", 9.0 if slow else draw.uniform(0.8, 1.6), draw.uniform(-4, 4))
        for _ in range(draw.randint(2, 4)):
            failing = draw.random() < 0.12
            worker.call("etl.parse_rows", draw.uniform(0.15, 0.45), draw.uniform(-2, 2),
                        **(bad if failing else {}))  # fmt: skip
        if worker.pid == 4120 and worker.clock > 13:
            worker.call("etl.parse_rows", 0.0, never_ends=True)
    while cache.clock < 19.5:
        cache.call("etl.Cache.put", draw.uniform(0.05, 0.12), 24.0)
        cache.clock += draw.uniform(0.4, 0.9)
    for process in processes:
        process.close()


def chromium() -> str | None:
    """A headless-capable Chromium on PATH, if any."""
    return next(
        (found for name in ("chromium", "chromium-browser", "google-chrome")
         if (found := shutil.which(name))),
        None,
    )  # fmt: skip


def report_png(target: Path, browser: str) -> None:
    """Write the HTML report of the pictured run as headless Chromium renders it."""
    import raytrace_kit  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        pictured_run(run)
        page = raytrace_kit.report(run).save_html(Path(tmp) / "report.html")
        command = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp}/profile", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--force-device-scale-factor=1", "--window-size=980,1380",
            f"--screenshot={target}", page.as_uri(),
        ]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, timeout=180)  # noqa: S603


if __name__ == "__main__":
    report_svg(HERE / "_static" / "report.svg")
    print(HERE / "_static" / "report.svg")
    browser = chromium()
    if browser is None:
        print("no chromium on PATH: _static/report-html.png stays as committed")
    else:
        report_png(HERE / "_static" / "report-html.png", browser)
        print(HERE / "_static" / "report-html.png")
