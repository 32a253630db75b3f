"""The call tree as OpenTelemetry spans (``_reports.otel``), from files the kit's writer made.

One run of a known shape (tests/otel_runs.py): a root that logs and submits two calls,
one of which submits two more (one failing once, then retried in another process), a
root retried once, and a call whose process died. Its spans are checked where a tracing
backend shows them: ids and parents, times, status and exception, attributes, events.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import raytrace_kit
from raytrace_kit._reports.otel import export
from raytrace_kit._reports.otel.spans import nanoseconds, span_id
from tests.otel_runs import ORIGIN, Process, failure, ns, task_of
from tests.otlp import hex_to_base64
from tests.otlp import json_values as plain

ROOT, MID1, MID2 = "a000000000000001", "b000000000000001", "b000000000000002"
LEAF1, LEAF2, LEAF2_AGAIN = "c000000000000001", "c000000000000002", "c000000000000003"
FLAKY, FLAKY_AGAIN, DIED = "e000000000000001", "e000000000000002", "f000000000000001"


def dead_pid() -> int:
    """The pid of a process that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def write_run(directory: Path) -> None:
    """The run the tests read: children's files sort (and are read) before their parents'."""
    leaves = Process(directory, 101)
    leaves.call(LEAF1, "jobs.leaf", 2.0, 3.0, parent=(MID1, task_of(MID1)))
    leaves.call(
        LEAF2, "jobs.leaf", 3.1, 3.5, failure("leaf failed"),
        parent=(MID1, task_of(MID1)), task=task_of(LEAF2),
    )  # fmt: skip
    leaves.call(MID2, "jobs.mid", 6.0, 7.0, parent=(ROOT, task_of(ROOT)))
    again = Process(directory, 102, node="cd" * 28)
    again.call(
        LEAF2_AGAIN, "jobs.leaf", 3.6, 4.0,
        parent=(MID1, task_of(MID1)), task=task_of(LEAF2), attempt=1,
    )  # fmt: skip
    mid = Process(directory, 103, node="cd" * 28)
    mid.start(MID1, "jobs.mid", 1.0, parent=(ROOT, task_of(ROOT)))
    mid.submit(task_of(LEAF1), "jobs.leaf", 1.1, MID1)
    mid.submit(task_of(LEAF2), "jobs.leaf", 1.2, MID1)
    mid.end(MID1, 5.0, 4.0)
    root = Process(directory, 104)
    root.start(ROOT, "jobs.root", 0.0)
    root.log(ROOT, "batch.loaded", 0.5, rows=3, source="s3://bucket", ratio=0.5, ok=True)
    root.submit(task_of(MID1), "jobs.mid", 0.9, ROOT)
    root.stuck(ROOT, 8.0, 8.0)
    root.end(ROOT, 10.0, 10.0)
    flaky = Process(directory, 105)
    flaky.call(FLAKY, "jobs.flaky", 11.0, 11.5, failure("first try"), task=task_of(FLAKY))
    flaky.call(FLAKY_AGAIN, "jobs.flaky", 12.0, 12.5, task=task_of(FLAKY), attempt=1)
    died = Process(directory, dead_pid())
    died.start(DIED, "jobs.crash", 13.0)
    died.log(DIED, "about.to.die", 13.2)
    driver = Process(directory, 100)
    driver.submit(task_of(ROOT), "jobs.root", -0.25)
    for process in (leaves, again, mid, root, flaky, died, driver):
        process.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("run")
    write_run(directory)
    return directory


def read_json(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def exported(run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The spans of the OTLP JSON file, by span id, with their resource's attributes."""
    target = tmp_path_factory.mktemp("out") / "spans.jsonl"
    export.to_json_file(raytrace_kit.open_session(run), target)
    spans = {}
    for request in read_json(target):
        for resource_spans in request["resourceSpans"]:
            resource = plain(resource_spans["resource"]["attributes"])
            for scope in resource_spans["scopeSpans"]:
                assert scope["scope"]["name"] == "raytrace_kit"
                for span in scope["spans"]:
                    span["resource"] = resource
                    spans[span["spanId"]] = span
    return spans


def trace_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class TestTree:
    """One span per execution, its parent the submitting call, its trace its root's."""

    def test_one_span_per_execution_with_the_call_id_as_span_id(self, exported: dict) -> None:
        assert sorted(exported) == sorted(
            [ROOT, MID1, MID2, LEAF1, LEAF2, LEAF2_AGAIN, FLAKY, FLAKY_AGAIN, DIED]
        )

    def test_parents_cross_processes_and_nodes(self, exported: dict) -> None:
        parents = {span_id: span.get("parentSpanId") for span_id, span in exported.items()}
        assert parents == {
            ROOT: None, MID1: ROOT, MID2: ROOT, LEAF1: MID1, LEAF2: MID1, LEAF2_AGAIN: MID1,
            FLAKY: None, FLAKY_AGAIN: None, DIED: None,
        }  # fmt: skip
        assert exported[MID1]["resource"]["ray.node_id"] == "cd" * 28
        assert exported[ROOT]["resource"]["ray.node_id"] == "ab" * 28

    def test_a_trace_per_root_named_by_its_task_id(self, exported: dict) -> None:
        """Children read before their parents still get their root's trace."""
        for call in (ROOT, MID1, MID2, LEAF1, LEAF2, LEAF2_AGAIN):
            assert exported[call]["traceId"] == trace_of(task_of(ROOT)), call
        assert exported[FLAKY]["traceId"] == exported[FLAKY_AGAIN]["traceId"]
        assert exported[FLAKY]["traceId"] == trace_of(task_of(FLAKY))
        assert exported[DIED]["traceId"] == trace_of(task_of(DIED))

    def test_retries_are_siblings_that_say_their_attempt(self, exported: dict) -> None:
        first, second = (
            plain(exported[LEAF2]["attributes"]),
            plain(exported[LEAF2_AGAIN]["attributes"]),
        )
        assert (first["ray.attempt"], second["ray.attempt"]) == (0, 1)
        assert first["ray.task_id"] == second["ray.task_id"] == task_of(LEAF2)
        assert exported[LEAF2]["parentSpanId"] == exported[LEAF2_AGAIN]["parentSpanId"]

    def test_exporting_again_gives_the_same_file(self, run: Path, tmp_path: Path) -> None:
        session = raytrace_kit.open_session(run)
        export.to_json_file(session, tmp_path / "a.jsonl")
        export.to_json_file(session, tmp_path / "b.jsonl")
        assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


class TestSpan:
    """What one span says: times, names, attributes, status, events."""

    def test_times_are_the_calls_own_in_nanoseconds(self, exported: dict) -> None:
        span = exported[MID1]
        assert (span["startTimeUnixNano"], span["endTimeUnixNano"]) == (str(ns(1.0)), str(ns(5.0)))

    def test_attributes_follow_the_conventions_and_ray_ids(self, exported: dict) -> None:
        span = exported[MID1]
        attributes = plain(span["attributes"])
        assert span["name"] == "jobs.mid"
        assert span["kind"] == 1  # SPAN_KIND_INTERNAL
        assert attributes["code.function"] == "mid"
        assert attributes["code.namespace"] == "jobs"
        assert attributes["code.function.name"] == "jobs.mid"
        assert attributes["ray.task_id"] == task_of(MID1)
        assert attributes["ray.call.kind"] == "task"
        assert attributes["ray.memory.rss_start_bytes"] == 100 * 2**20
        assert attributes["ray.memory.rss_growth_bytes"] == 2**20
        assert attributes["ray.cpu_s"] == pytest.approx(2.0)
        assert attributes["ray.process_cpu_s"] == pytest.approx(2.4)
        assert span["resource"]["process.pid"] == 103
        assert span["resource"]["service.name"] == "ray"
        assert span["resource"]["ray.worker_id"] == f"{103:056x}"
        assert "host.name" not in span["resource"]  # a plain folder: the host is not known

    def test_queue_time_from_the_submission_of_the_first_attempt(self, exported: dict) -> None:
        queued = {k: plain(s["attributes"]).get("ray.queue_time_s") for k, s in exported.items()}
        assert queued[ROOT] == pytest.approx(0.25)  # submitted by the driver
        assert queued[MID1] == pytest.approx(0.1)
        assert queued[LEAF2] == pytest.approx(1.9)
        assert queued[LEAF2_AGAIN] is None  # a retry: its wait includes the first attempt
        assert queued[MID2] is None  # no call.submit recorded

    def test_a_failure_is_an_error_with_its_exception_event(self, exported: dict) -> None:
        span = exported[LEAF2]
        assert span["status"] == {"code": 2, "message": "ValueError: leaf failed"}
        (event,) = span["events"]
        assert event["name"] == "exception"
        assert event["timeUnixNano"] == str(ns(3.5))
        found = plain(event["attributes"])
        assert found["exception.type"] == "ValueError"
        assert found["exception.message"] == "leaf failed"
        assert found["exception.stacktrace"].startswith("Traceback (most recent call last):")
        assert "raise ValueError(message)" in found["exception.stacktrace"]
        assert found["exception.stacktrace"].rstrip().endswith("ValueError: leaf failed")
        assert plain(span["attributes"])["error.type"] == "ValueError"

    def test_a_success_has_no_status_code(self, exported: dict) -> None:
        """UNSET: OpenTelemetry's "no error" (OK is for the program itself to say)."""
        assert exported[LEAF2_AGAIN]["status"] == {}
        assert "events" not in exported[LEAF2_AGAIN]

    def test_log_events_become_span_events_without_the_call_fields(self, exported: dict) -> None:
        event, _ = exported[ROOT]["events"]
        assert event["name"] == "batch.loaded"
        assert event["timeUnixNano"] == str(ns(0.5))
        assert plain(event["attributes"]) == {
            "level": "info", "rows": 3, "source": "s3://bucket", "ratio": 0.5, "ok": True
        }  # fmt: skip

    def test_a_stuck_report_is_an_event_with_its_stack(self, exported: dict) -> None:
        """The kit's call.stuck: where the call was when it ran past its stuck_after."""
        _, event = exported[ROOT]["events"]
        assert (event["name"], event["timeUnixNano"]) == ("call.stuck", str(ns(8.0)))
        found = plain(event["attributes"])
        assert (found["level"], found["running_s"], found["thread"]) == (
            "warning",
            8.0,
            "MainThread",
        )
        assert json.loads(found["stack"]) == [["/app/job.py", 12, "root", "ray.get(refs)"]]
        assert json.loads(found["waiting_on"])["what"] == "ray.get"

    def test_an_interrupted_call_ends_when_its_process_was_last_heard(self, exported: dict) -> None:
        span = exported[DIED]
        assert span["endTimeUnixNano"] == str(ns(13.2))
        assert span["startTimeUnixNano"] == str(ns(13.0))
        assert span["status"]["code"] == 2
        assert span["status"]["message"].startswith("interrupted: its process ended")
        assert plain(span["attributes"])["ray.call.status"] == "interrupted"
        assert [e["name"] for e in span["events"]] == ["about.to.die"]


class TestJsonEncoding:
    """The file follows OTLP's JSON encoding: protobuf's mapping, hex ids, camelCase."""

    @pytest.fixture
    def lines(self, run: Path, tmp_path: Path) -> list[str]:
        export.to_json_file(raytrace_kit.open_session(run), tmp_path / "t.jsonl", batch=4)
        return (tmp_path / "t.jsonl").read_text().splitlines()

    def test_each_line_is_an_export_request_protobuf_reads(self, lines: list[str]) -> None:
        """Ids as base64 (protobuf's mapping for bytes), the rest as is, unknown fields fail."""
        assert len(lines) == 3  # 9 spans in batches of 4
        spans = []
        for line in lines:
            request = ExportTraceServiceRequest()
            json_format.Parse(hex_to_base64(line), request)
            for resource_spans in request.resource_spans:
                spans.extend(resource_spans.scope_spans[0].spans)
        assert len(spans) == 9
        by_id = {span.span_id.hex(): span for span in spans}
        assert by_id[LEAF2].parent_span_id.hex() == MID1
        assert by_id[LEAF2].status.code == 2  # STATUS_CODE_ERROR
        assert by_id[MID1].start_time_unix_nano == ns(1.0)

    def test_ids_hex_times_strings_enums_integers(self, lines: list[str]) -> None:
        for line in lines:
            for resource_spans in json.loads(line)["resourceSpans"]:
                for span in resource_spans["scopeSpans"][0]["spans"]:
                    assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"])
                    assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
                    assert re.fullmatch(r"[0-9a-f]{16}", span.get("parentSpanId", "0" * 16))
                    assert re.fullmatch(r"[0-9]{19}", span["startTimeUnixNano"])
                    assert re.fullmatch(r"[0-9]{19}", span["endTimeUnixNano"])
                    assert isinstance(span["kind"], int)
                    assert isinstance(span["status"].get("code", 0), int)
                    for event in span.get("events", []):
                        assert re.fullmatch(r"[0-9]{19}", event["timeUnixNano"])
                    keys = set(span) | {k for e in span.get("events", []) for k in e}
                    assert all(re.fullmatch(r"[a-z]+([A-Z][a-z]+)*", key) for key in keys), keys


@pytest.fixture(scope="module")
def finished(run: Path) -> dict[str, ReadableSpan]:
    """The spans Session.to_otel() handed to the SDK's in-memory exporter, by span id."""
    exporter = InMemorySpanExporter()
    assert raytrace_kit.open_session(run).to_otel(exporter, batch_size=2) == 9
    return {f"{s.context.span_id:016x}": s for s in exporter.get_finished_spans()}


class TestToOtel:
    """Session.to_otel(exporter): the SDK's own span objects, as any exporter gets them."""

    def test_ids_parents_and_trace(self, finished: dict[str, ReadableSpan]) -> None:
        leaf = finished[LEAF1]
        assert leaf.parent is not None
        assert f"{leaf.parent.span_id:016x}" == MID1
        assert f"{leaf.context.trace_id:032x}" == trace_of(task_of(ROOT))
        assert finished[ROOT].parent is None

    def test_status_events_resource_times(self, finished: dict[str, ReadableSpan]) -> None:
        failed = finished[LEAF2]
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.status.description == "ValueError: leaf failed"
        assert failed.events[0].name == "exception"
        assert failed.events[0].attributes["exception.type"] == "ValueError"
        assert failed.resource.attributes["process.pid"] == 101
        assert (failed.start_time, failed.end_time) == (ns(3.1), ns(3.5))
        assert finished[ROOT].events[0].attributes["rows"] == 3
        assert finished[MID1].status.status_code is StatusCode.UNSET
        assert finished[MID1].instrumentation_scope.name == "raytrace_kit"


class TestRunning:
    """A call without an end whose process runs here is running: left out, and counted."""

    def test_left_out_and_said(self, tmp_path: Path) -> None:
        alive = Process(tmp_path, os.getpid())  # this process: it runs
        alive.start(ROOT, "jobs.root", time.time() - ORIGIN)
        alive.close()
        counts = export.to_json_file(raytrace_kit.open_session(tmp_path), tmp_path / "t.jsonl")
        assert (counts.spans, counts.running) == (0, 1)
        assert "1 calls still running were left out" in str(counts)
        assert (tmp_path / "t.jsonl").read_text() == ""


class TestHelpers:
    """The pure parts: times in nanoseconds, span ids from call ids."""

    @given(
        moment=st.datetimes(
            min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1),
            timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30))]),
        ),
        form=st.sampled_from(["offset", "Z", "naive"]),
    )  # fmt: skip
    def test_nanoseconds_are_exact_in_any_iso_form(self, moment: datetime, form: str) -> None:
        """What the kit writes (+00:00), other writers' Z, naive times read as UTC."""
        utc = moment.astimezone(timezone.utc)
        text = {
            "offset": moment.isoformat(timespec="microseconds"),
            "Z": utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z",
            "naive": utc.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds"),
        }[form]
        expected = calendar.timegm(utc.timetuple()) * 10**9 + utc.microsecond * 1000
        assert nanoseconds(text) == expected

    @given(st.integers(min_value=1, max_value=2**64 - 1))
    def test_a_kit_call_id_is_its_own_span_id(self, number: int) -> None:
        call_id = f"{number:016x}"
        assert span_id(call_id).hex() == call_id

    @pytest.mark.parametrize("call_id", ["0" * 16, "not-hex-at-all!!", "short", "x" * 40])
    def test_other_ids_hash_to_eight_nonzero_bytes(self, call_id: str) -> None:
        made = span_id(call_id)
        assert len(made) == 8
        assert any(made)
        assert made == span_id(call_id)  # the same every time
