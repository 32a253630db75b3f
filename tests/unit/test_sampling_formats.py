"""The samples file written and read back, and each output format parsed back (no Ray)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from raytrace_kit._output.samples import SamplesFile
from raytrace_kit._reports import profile_formats
from raytrace_kit._reports.samples import (
    Frame,
    SampleRow,
    hottest_lines,
    read_samples,
    select,
)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's fields, in order: (number, varint or bytes)."""
    found: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            found.append((number, value))
        elif wire == 2:
            size, at = _varint(data, at)
            found.append((number, data[at : at + size]))
            at += size
        else:
            raise AssertionError(f"wire type {wire} is not used by profile.proto's fields here")
    return found


def _packed(data: bytes) -> list[int]:
    values, at = [], 0
    while at < len(data):
        value, at = _varint(data, at)
        values.append(value)
    return values


def decode_pprof(data: bytes) -> dict[str, Any]:
    """profile.proto, decoded far enough to check it: samples, locations' lines, strings."""
    fields = _fields(data)
    strings = [bytes(v).decode() for n, v in fields if n == 6 and isinstance(v, bytes)]
    functions: dict[int, str] = {}
    for number, value in fields:
        if number == 5 and isinstance(value, bytes):
            function = dict(_fields(value))
            functions[int(function[1])] = strings[int(function.get(4, 0))]  # type: ignore[arg-type]
    lines: dict[int, tuple[str, int]] = {}
    samples = []
    for number, value in fields:
        if number == 4 and isinstance(value, bytes):
            location = _fields(value)
            ident = next(v for n, v in location if n == 1)
            line = dict(_fields(next(v for n, v in location if n == 4)))  # type: ignore[arg-type]
            lines[int(ident)] = (functions[int(line[1])], int(line.get(2, 0)))  # type: ignore[arg-type]
        if number == 2 and isinstance(value, bytes):
            sample = _fields(value)
            labels = {}
            for n, v in sample:
                if n == 3:
                    label = dict(_fields(v))  # type: ignore[arg-type]
                    labels[strings[int(label[1])]] = strings[int(label[2])]  # type: ignore[arg-type]
            samples.append({
                "locations": _packed(next(v for n, v in sample if n == 1)),  # type: ignore[arg-type]
                "values": _packed(next(v for n, v in sample if n == 2)),  # type: ignore[arg-type]
                "labels": labels,
            })  # fmt: skip
    types = [dict(_fields(v)) for n, v in fields if n == 1 and isinstance(v, bytes)]
    return {
        "strings": strings,
        "samples": samples,
        "lines": lines,
        "sample_types": [(strings[int(t[1])], strings[int(t[2])]) for t in types],  # type: ignore[arg-type]
        "period": next((v for n, v in fields if n == 12), 0),
    }


_HOT = Frame("crunch", "/app/model.py", 41)
_OUTER = Frame("main_loop", "/ray/worker.py", 10)


def _rows() -> list[SampleRow]:
    return [
        SampleRow((_OUTER, _HOT), "n1/1", "MainThread", "c1", "m.crunch", None, False, 90, 0.9),
        SampleRow((_OUTER, Frame("crunch", "/app/model.py", 43)), "n1/1", "MainThread", "c1",
                  "m.crunch", None, False, 10, 0.1),
        SampleRow((_OUTER,), "n1/2", "MainThread", None, None, None, True, 50, 0.5),
    ]  # fmt: skip


class TestFormats:
    """Each format says where the samples are, as its readers parse it."""

    def test_speedscope_is_sampled_profiles_with_shared_frames(self) -> None:
        """One sampled profile per process and thread; leaf frames weigh their seconds."""
        made = json.loads(json.dumps(profile_formats.speedscope(_rows())))
        assert made["$schema"] == "https://www.speedscope.app/file-format-schema.json"
        frames = made["shared"]["frames"]
        profiles = {p["name"]: p for p in made["profiles"]}
        crunch = profiles["n1/1 MainThread"]
        assert crunch["type"] == "sampled"
        assert crunch["unit"] == "seconds"
        leafs = [frames[s[-1]]["line"] for s in crunch["samples"]]
        assert dict(zip(leafs, crunch["weights"], strict=True)) == {41: 0.9, 43: 0.1}
        assert crunch["endValue"] == pytest.approx(1.0)

    def test_collapsed_is_one_line_per_stack(self) -> None:
        """``outer;inner count``, outermost first, frames named ``name (file:line)``."""
        lines = profile_formats.collapsed(_rows()).splitlines()
        assert "main_loop (/ray/worker.py:10);crunch (/app/model.py:41) 90" in lines
        assert "main_loop (/ray/worker.py:10) 50" in lines

    def test_pprof_decodes_to_the_same_samples(self) -> None:
        """Gzipped profile.proto: leaf-first locations, counts, labels, a string table."""
        profile = decode_pprof(gzip.decompress(profile_formats.pprof(_rows())))
        assert profile["strings"][0] == ""
        assert profile["sample_types"] == [("samples", "count"), ("cpu", "nanoseconds")]
        by_leaf = {
            profile["lines"][s["locations"][0]]: s for s in profile["samples"] if s["labels"].get(
                "function") == "m.crunch"
        }  # fmt: skip
        assert by_leaf[("/app/model.py", 41)]["values"] == [90, 900_000_000]
        assert by_leaf[("/app/model.py", 41)]["labels"]["state"] == "running"
        assert profile["period"] == 10_000_000  # 100 Hz


class TestReading:
    """The samples file read back: interned frames resolved, torn lines skipped."""

    def test_written_samples_read_back(self, tmp_path: Path) -> None:
        """Frames and stacks defined once; counts summed across flushes; a torn line skipped."""
        path = tmp_path / "samples-abc-7.jsonl"
        out = SamplesFile(path, {"pid": 7, "node_id": "abc", "hz": 100.0})
        code = _rows.__code__
        for _ in range(2):
            frame = out.frames.get((code, 5)) or out.frame(code, 5)
            stack = out.stacks.get((frame,)) or out.stack((frame,))
            thread = out.threads.get(1) or out.thread(1, "MainThread")
            call = out.call("c9", {"call_id": "c9", "function": "m.f", "actor_id": None})
            out.counts[stack, thread, call, 0] += 30
            assert out.flush()
        out.close()
        with path.open("ab") as handle:
            handle.write(b'{"k":"counts","rows":[[1,1')  # a kill -9 mid-line
        (row,) = read_samples([path])
        assert (row.count, row.seconds, row.call_id, row.thread) == (60, 0.6, "c9", "MainThread")
        assert row.stack == (Frame("_rows", code.co_filename, 5),)
        assert path.read_text().count('"k":"frame"') == 1

    def test_the_file_stops_at_its_cap(self, tmp_path: Path, monkeypatch: Any) -> None:
        """Past RAYTRACE_SAMPLE_MAX_BYTES a ``capped`` record ends the file."""
        monkeypatch.setenv("RAYTRACE_SAMPLE_MAX_BYTES", "5000")
        path = tmp_path / "samples-abc-8.jsonl"
        out = SamplesFile(path, {"pid": 8})
        code = _rows.__code__
        flushed = True
        line = 0
        while flushed:
            line += 1
            out.stack((out.frame(code, line),))
            flushed = out.flush()
        out.close()
        assert path.stat().st_size <= 5000 + 100
        assert json.loads(path.read_text().splitlines()[-1])["k"] == "capped"

    def test_select_and_hottest_lines(self) -> None:
        """Running samples only by default; the hottest line and its share, per function."""
        rows = _rows()
        assert sum(r.count for r in select(rows)) == 100
        assert sum(r.count for r in select(rows, idle=True)) == 150
        assert select(rows, function="crunch") == rows[:2]
        assert select(rows, call="c") == rows[:2]
        said = hottest_lines(rows, ["m.crunch"])
        assert said == {"m.crunch": "90% of crunch's running samples at model.py:41"}
