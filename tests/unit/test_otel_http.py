"""``raytrace-kit export``: spans to a real OTLP/HTTP receiver, a file, and clear errors.

The receiver (tests/otlp.py) is an ``http.server`` on 127.0.0.1 that decodes what it gets
with opentelemetry-proto, as a collector does. The command runs as a user runs it: a
subprocess. The run is the one tests/unit/test_otel_export.py reads.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import raytrace_kit
from raytrace_kit._reports.otel.otlp_http import Http
from raytrace_kit._reports.otel.stream import session_spans
from raytrace_kit.exceptions import ExportError, MissingExtraError
from tests.otlp import Receiver, receiver
from tests.unit.test_otel_export import LEAF2, MID1, ROOT, write_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("run")
    write_run(directory)
    return directory


@pytest.fixture
def collector() -> Iterator[Receiver]:
    yield from receiver()


def cli(*arguments: str, blocked: str = "") -> subprocess.CompletedProcess[str]:
    """``raytrace-kit ARGUMENTS`` in a subprocess.

    ``blocked``: as if the package of that name were not installed (its import fails, as
    it does without the extra).
    """
    block = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if (name + '.').startswith({blocked!r} + '.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Missing())\n"
        if blocked
        else ""
    )
    code = block + "import sys\nfrom raytrace_kit.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *arguments],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TestSend:
    """``export otlp``: every span arrives, decoded by the receiver, as the file has it."""

    def test_protobuf_to_the_receiver(self, run: Path, collector: Receiver) -> None:
        done = cli("export", "otlp", str(run), "--endpoint", collector.url, "--batch-size", "4")
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[0].startswith(f"raytrace-kit: {run}")  # which run
        assert done.stdout.startswith("9 spans in 3 traces (2 failed, 1 interrupted)")
        assert [(path, kind) for path, kind, _ in collector.requests] == [
            ("/v1/traces", "application/x-protobuf")
        ] * 3
        spans = {r.span.span_id.hex(): r for r in collector.spans}
        assert len(spans) == 9
        assert spans[LEAF2].span.parent_span_id.hex() == MID1
        assert spans[LEAF2].span.status.code == 2
        assert spans[LEAF2].span.events[0].name == "exception"
        assert spans[ROOT].resource["process.pid"] == 104
        assert spans[ROOT].attributes["ray.queue_time_s"] == pytest.approx(0.25)

    def test_json_and_headers_and_a_url_without_path(self, run: Path, collector: Receiver) -> None:
        """An API key goes in the header, and is never printed."""
        bare = collector.url.removesuffix("/v1/traces")
        done = cli(
            "export", "otlp", str(run), "--endpoint", bare, "--protocol", "http/json",
            "--header", "x-api-key=sekret-123",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert len(collector.spans) == 9
        ((path, kind, headers),) = collector.requests
        assert (path, kind) == ("/v1/traces", "application/json")
        assert headers["x-api-key"] == "sekret-123"
        assert "sekret" not in done.stdout + done.stderr

    def test_the_same_spans_as_the_file(
        self, run: Path, collector: Receiver, tmp_path: Path
    ) -> None:
        target = tmp_path / "spans.jsonl"
        done = cli("export", "otlp-json", str(run), "-o", str(target), "-q")
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert done.stdout.startswith("9 spans in 3 traces")
        Http(collector.url).send(list(session_spans(raytrace_kit.open_session(run))))
        in_file = {
            span["spanId"]: (span["traceId"], span.get("parentSpanId", ""), span["name"])
            for line in target.read_text().splitlines()
            for rs in json.loads(line)["resourceSpans"]
            for span in rs["scopeSpans"][0]["spans"]
        }
        received = {
            r.span.span_id.hex(): (r.span.trace_id.hex(), r.span.parent_span_id.hex(), r.span.name)
            for r in collector.spans
        }
        assert received == in_file


class TestRefusals:
    """An endpoint that refuses gets an ExportError that names the fix."""

    @pytest.fixture
    def spans(self, run: Path) -> list:
        return list(session_spans(raytrace_kit.open_session(run)))[:2]

    def test_nothing_listening(self, run: Path) -> None:
        url = f"http://127.0.0.1:{closed_port()}/v1/traces"
        done = cli("export", "otlp", str(run), "--endpoint", url)
        assert done.returncode == 1
        assert f"could not send spans to {url}: nothing listens there" in done.stderr
        assert "port 4318" in done.stderr
        assert "Traceback" not in done.stderr

    @pytest.mark.parametrize(
        ("status", "fix"),
        [
            (404, "OTLP/HTTP takes traces at /v1/traces"),
            (401, "--header NAME=VALUE"),
            (400, "is --endpoint an OTLP/HTTP traces endpoint?"),
            (413, "smaller --batch-size"),
            (500, "it failed while taking the spans: see its logs"),
        ],
    )
    def test_an_error_status_names_the_fix(
        self, collector: Receiver, spans: list, status: int, fix: str
    ) -> None:
        collector.answers = [status]
        with pytest.raises(ExportError, match=f"answered HTTP {status}") as raised:
            Http(collector.url).send(spans)
        assert fix in str(raised.value)
        assert "It said: receiver says no" in str(raised.value)
        assert raised.value.status == status
        assert len(collector.requests) == 1  # not retried

    def test_busy_is_tried_again(self, collector: Receiver, spans: list) -> None:
        collector.answers = [503, 429]
        Http(collector.url).send(spans)
        assert len(collector.requests) == 3
        assert len(collector.spans) == 2

    def test_busy_five_times_fails(self, collector: Receiver, spans: list) -> None:
        collector.answers = [503] * 5
        with pytest.raises(ExportError, match="overloaded or unavailable, and still was after 5"):
            Http(collector.url).send(spans)
        assert len(collector.requests) == 5

    def test_a_partial_success_is_said(self, run: Path, collector: Receiver) -> None:
        """Accepted with some spans rejected (OTLP's partial success): said, not an error."""
        collector.answers = [-2]
        done = cli("export", "otlp", str(run), "--endpoint", collector.url)
        assert done.returncode == 0, done.stderr
        assert "the endpoint accepted the requests but rejected 2 spans" in done.stderr

    def test_not_a_url(self, run: Path) -> None:
        done = cli("export", "otlp", str(run), "--endpoint", "localhost:4318")
        assert done.returncode == 2
        assert "is not an http:// or https:// URL" in done.stderr


class TestWithoutTheExtra:
    """Without OpenTelemetry's packages: the error says what to install; files still work."""

    def test_otlp_names_the_extra(self, run: Path) -> None:
        url = "http://127.0.0.1:1"
        done = cli("export", "otlp", str(run), "--endpoint", url, blocked="opentelemetry")
        assert done.returncode == 1
        assert "pip install 'raytrace_kit[otel]'" in done.stderr
        assert "Traceback" not in done.stderr

    def test_grpc_names_its_package(self, run: Path) -> None:
        done = cli(
            "export", "otlp", str(run), "--protocol", "grpc",
            blocked="opentelemetry.exporter.otlp.proto.grpc",
        )  # fmt: skip
        assert done.returncode == 1
        assert "pip install opentelemetry-exporter-otlp-proto-grpc" in done.stderr

    def test_json_needs_nothing(self, run: Path, tmp_path: Path) -> None:
        target = tmp_path / "spans.jsonl"
        done = cli("export", "otlp-json", str(run), "-o", str(target), blocked="opentelemetry")
        assert done.returncode == 0, done.stderr
        assert len(target.read_text().splitlines()) == 1
        done = cli(
            "export", "otlp", str(run), "--protocol", "http/json",
            "--endpoint", f"http://127.0.0.1:{closed_port()}", blocked="opentelemetry",
        )  # fmt: skip
        assert "nothing listens there" in done.stderr  # it got as far as sending

    def test_to_otel_names_the_extra(self, run: Path) -> None:
        code = (
            "import sys\n"
            "class Missing:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'opentelemetry':\n"
            "            raise ModuleNotFoundError(name, name=name)\n"
            "sys.meta_path.insert(0, Missing())\n"
            "import raytrace_kit\n"
            "try:\n"
            f"    raytrace_kit.open_session({str(run)!r}).to_otel(object())\n"
            "except raytrace_kit.MissingExtraError as exc:\n"
            "    print(exc)\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, check=True)  # fmt: skip
        assert "needs the OpenTelemetry SDK" in done.stdout
        assert "pip install 'raytrace_kit[otel]'" in done.stdout
        assert issubclass(MissingExtraError, ImportError)
