"""Draw the docs' trace picture from the export itself: run by the docs build (``nox -s docs``).

A small run (a request fanned out to shards on two nodes, one shard failing and retried,
a merge at the end) is written as the kit writes events, with fixed times; it is exported
with ``raytrace-kit export otlp-json``'s own code; and the OTLP JSON file it wrote is read
back and drawn as a tracing backend draws a trace: one row per span under its parent,
its bar on a shared time axis, failures red with their exception marked, log events as
ticks. Nothing is fetched; the picture changes only when the export does.

Run: python docs/otel_waterfall.py   (writes docs/_static/otel-waterfall.svg)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from raytrace_kit._html import element
from raytrace_kit._reports.otel import export
from raytrace_kit._reports.reading import open_session
from raytrace_kit._reports.run import svg

HERE = Path(__file__).parent
NODES = ("e57b3b9653bf7c6cd73b0d79549f1f865e2781232c72b314dd78b374",
         "9c1d2f7a40b86e5513c2aa90f1e6d7b3c48a0e2291f5d6b7c8e9fa0b")  # fmt: skip
TRACEBACK = (
    'Traceback (most recent call last):\n  File "/app/etl.py", line 31, in load_shard\n'
    "    rows = fetch(uri)\nConnectionError: s3://bucket/part-00002: connection reset\n"
)


class _Process:
    """One worker's file: lines as the kit writes them (compact JSON, timestamp first)."""

    def __init__(self, directory: Path, node: str, pid: int) -> None:
        self.path = directory / f"events-{node[:12]}-{pid}.jsonl"
        self.base = {"job_id": "01000000", "node_id": node, "worker_id": f"{pid:056x}", "pid": pid}
        self.lines: list[tuple[float, str]] = []

    def line(self, at: float, event: str, **fields: Any) -> None:
        stamp = f"2026-11-22T04:02:{at:09.6f}+00:00"
        record = {"timestamp": stamp, "level": "info", "event": event, "schema": 2,
                  **fields, **self.base}  # fmt: skip
        self.lines.append((at, json.dumps(record, separators=(",", ":"))))

    def call(
        self,
        call_id: str,
        function: str,
        begun: float,
        ended: float,
        parent: str | None = None,
        *,
        attempt: int = 0,
        task: str | None = None,
        **end: Any,
    ) -> None:
        fields = {
            "call_id": call_id, "parent_call_id": parent,
            "parent_task_id": parent.ljust(48, "f") if parent else None,
            "function": function, "kind": "task", "mode": "ray",
            "task_id": task or call_id.ljust(48, "f"), "task_name": function.rsplit(".", 1)[-1],
            "actor_id": None, "attempt": attempt,
        }  # fmt: skip
        self.line(begun, "call.start", **fields, rss_bytes=300 * 2**20)
        self.line(ended, "call.end", **fields, duration_s=round(ended - begun, 6),
                  status=end.pop("status", "ok"), rss_bytes=310 * 2**20,
                  rss_start_bytes=300 * 2**20, **end)  # fmt: skip

    def close(self) -> None:
        text = "".join(line + "\n" for _, line in sorted(self.lines))
        self.path.write_text(text, encoding="utf-8")


def pictured_run(directory: Path) -> None:
    """A request: three shards on two nodes (one fails, then is retried), then a merge."""
    driver, a, b, c = (_Process(directory, NODES[i % 2], 3797 + i) for i in range(4))
    root = "5f1c2a9b3e000001"
    driver.call(root, "etl.handle_request", 0.0, 2.6)
    driver.line(0.05, "request.received", call_id=root, shards=3)
    shards = [("6a0b3c8d11000000", a, 0.10, 0.9), ("6a0b3c8d11000002", c, 0.15, 1.2)]
    failed, retried = "6a0b3c8d11000001", "6a0b3c8d11000009"
    b.call(failed, "etl.load_shard", 0.12, 0.47, root, task=failed.ljust(48, "f"),
           status="error", error_type="ConnectionError",
           error="s3://bucket/part-00002: connection reset", traceback=TRACEBACK)  # fmt: skip
    a.call(retried, "etl.load_shard", 1.05, 1.75, root, attempt=1, task=failed.ljust(48, "f"))
    shards.insert(1, (retried, a, 1.05, 0.7))
    for n, (shard, process, begun, took) in enumerate(shards):
        if shard != retried:
            process.call(shard, "etl.load_shard", begun, begun + took, root)
        for k in range(2):
            at = begun + 0.1 + k * took / 2.4
            worker = (b, c, a)[(n + k) % 3]
            worker.call(f"7c2e4f{n:05x}{k:05x}", "etl.parse_rows", at, at + took / 3, shard)
    c.call("8d3f5a0000000001", "etl.merge", 1.9, 2.5, root)
    for process in (driver, a, b, c):
        process.close()


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans of an OTLP JSON file, each with its resource's attributes."""
    spans = []
    for line in path.read_text().splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            resource = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
            for scope in resource_spans["scopeSpans"]:
                for span in scope["spans"]:
                    span["resource"] = resource
                    spans.append(span)
    return spans


def _attribute(span: dict[str, Any], key: str) -> Any:
    for pair in span["attributes"]:
        if pair["key"] == key:
            return next(iter(pair["value"].values()))
    return None


def _rows(spans: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Each span with its depth, depth first, children in order of start."""
    children: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span.get("parentSpanId", ""), []).append(span)
    rows: list[tuple[int, dict[str, Any]]] = []

    def visit(parent: str, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: int(s["startTimeUnixNano"])):
            rows.append((depth, span))
            visit(span["spanId"], depth + 1)

    visit("", 0)
    return rows


def waterfall(spans: list[dict[str, Any]]) -> str:
    """The trace as a waterfall: a row per span, bars on one time axis."""
    rows = _rows(spans)
    origin = min(int(s["startTimeUnixNano"]) for s in spans)
    span_s = max(int(s["endTimeUnixNano"]) for s in spans) / 1e9 - origin / 1e9
    span_s, scale = svg.timeline({"span_s": span_s})
    tick = element("line", x1=6, x2=6, y1=-6, y2=6, stroke="#333")
    keys = [(svg.bar(svg.OK), "span"), (svg.bar(svg.FAILED), "ERROR span"),
            (svg.triangle(6, -4), "exception event"), (tick, "log event")]  # fmt: skip
    parts = [svg.legend(keys)]
    for index, (depth, span) in enumerate(rows):
        y = svg.TOP + index * svg.ROW
        start = (int(span["startTimeUnixNano"]) - origin) / 1e9
        end = (int(span["endTimeUnixNano"]) - origin) / 1e9
        failed = span["status"].get("code") == 2
        attempt = int(_attribute(span, "ray.attempt") or 0)
        name = span["name"].rsplit(".", 1)[-1] + (f" (attempt {attempt})" if attempt else "")
        node = span["resource"]["ray.node_id"]["stringValue"][:6]
        parts.append(svg.text(8 + 12 * depth, y + 14, svg.short(name, 24 - 2 * depth),
                              title=span["name"]))  # fmt: skip
        x0, x1 = scale(start), max(scale(end), scale(start) + 1.5)
        tip = (f"{span['name']}: {(end - start) * 1e3:.0f} ms on node {node}…, pid "
               f"{span['resource']['process.pid']['intValue']}"
               + (f"\n{span['status']['message']}" if failed else ""))  # fmt: skip
        parts.append(element("rect", x=svg.n(x0), y=svg.n(y + 4), width=svg.n(x1 - x0),
                             height=14, rx=2, fill=svg.FAILED if failed else svg.OK,
                             title=tip))  # fmt: skip
        label = f"{(end - start) * 1e3:.0f} ms · node {node}…"
        if x1 + 4 + 5.6 * len(label) <= svg.WIDTH - svg.RIGHT:
            parts.append(svg.text(x1 + 4, y + 15, label, font_size=10, fill="#666"))
        else:  # no room after the bar: inside its end
            parts.append(svg.text(x1 - 4, y + 15, label, font_size=10, fill="white",
                                  text_anchor="end"))  # fmt: skip
        for event in span.get("events", []):
            x = scale((int(event["timeUnixNano"]) - origin) / 1e9)
            if event["name"] == "exception":
                parts.append(
                    svg.triangle(x, y - 2, title="exception: " + span["status"]["message"])
                )
            else:
                parts.append(element("line", x1=svg.n(x), x2=svg.n(x), y1=svg.n(y + 2),
                                     y2=svg.n(y + 20), stroke="#333", stroke_width=1.5,
                                     title=f"log event: {event['name']}"))  # fmt: skip
    bottom = svg.TOP + len(rows) * svg.ROW + 6
    parts.append(svg.time_axis(scale, span_s, bottom))
    title = "One trace as a backend draws it: the spans of raytrace-kit export otlp-json"
    return svg.frame("waterfall", title, bottom + 44, *parts)


def main(target: Path) -> None:
    """Write the run, export it, draw the export into ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp, "run")
        run.mkdir()
        pictured_run(run)
        exported = Path(tmp, "traces.jsonl")
        export.to_json_file(open_session(run), exported)
        picture = waterfall(read_spans(exported))
    target.write_text(picture + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(HERE / "_static" / "otel-waterfall.svg")
    print(HERE / "_static" / "otel-waterfall.svg")
