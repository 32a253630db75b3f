"""The samples file written and read back, and each output format parsed back (no Ray)."""

from __future__ import annotations

import gzip
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from raytrace_kit._output.samples import SamplesFile
from raytrace_kit._reports.live import LiveSamples, hot_lines, merge_hot_lines
from raytrace_kit._reports.profiles import (
    Frame,
    SampleRow,
    collapsed,
    hottest_lines,
    pprof,
    read_samples,
    recent,
    select,
    speedscope,
    straggler_lines,
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
        made = json.loads(json.dumps(speedscope(_rows())))
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
        lines = collapsed(_rows()).splitlines()
        assert "main_loop (/ray/worker.py:10);crunch (/app/model.py:41) 90" in lines
        assert "main_loop (/ray/worker.py:10) 50" in lines

    def test_pprof_decodes_to_the_same_samples(self) -> None:
        """Gzipped profile.proto: leaf-first locations, counts, labels, a string table."""
        profile = decode_pprof(gzip.decompress(pprof(_rows())))
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


def _flush_one(out: SamplesFile, line: int, count: int, call: str = "c9") -> None:
    """One interval of ``count`` running samples at ``line`` of a call of ``m.f``."""
    code = _rows.__code__
    frame = out.frames.get((code, line)) or out.frame(code, line)
    stack = out.stacks.get((frame,)) or out.stack((frame,))
    thread = out.threads.get(1) or out.thread(1, "MainThread")
    made = out.call(call, {"call_id": call, "function": "m.f", "actor_id": None})
    out.counts[stack, thread, made, 0] += count
    assert out.flush()


class TestAsWritten:
    """A driver's file placed late; a file followed as it grows; the recent samples."""

    def test_a_driver_file_is_written_once_placed_header_first(self, tmp_path: Path) -> None:
        """Before Ray is up nothing is written; once placed, the header, then every count."""
        out = SamplesFile(None, {})
        _flush_one(out, 5, 30)
        path = tmp_path / "samples-abc-9.jsonl"
        assert not path.exists()
        out.place(path, {"pid": 9, "node_id": "abc", "hz": 100.0, "role": "driver",
                         "script": "/srv/app.py"})  # fmt: skip
        _flush_one(out, 5, 20)
        out.close()
        first = json.loads(path.read_text().splitlines()[0])
        assert (first["k"], first["role"], first["script"]) == ("process", "driver", "/srv/app.py")
        (row,) = read_samples([path])
        assert (row.count, row.driver) == (50, "/srv/app.py")

    def test_top_follows_a_file_as_it_grows(self, tmp_path: Path) -> None:
        """Each look reads the new lines only, and the hottest lines add up across looks."""
        out = SamplesFile(tmp_path / "samples-abc-7.jsonl", {"pid": 7, "hz": 100.0})
        follower = LiveSamples(tmp_path)
        _flush_one(out, 5, 30)
        (first,) = follower.look()
        assert (first["line"], first["function"], first["seconds"]) == (5, "m.f", 0.3)
        _flush_one(out, 6, 60)
        hot = follower.look()
        seen = [(h["line"], h["seconds"], h["share"]) for h in hot]
        assert seen == [(6, 0.6, 0.6667), (5, 0.3, 0.3333)]
        merged = merge_hot_lines([hot, hot])  # two nodes alike: twice the seconds, same shares
        assert [(h["line"], h["seconds"], h["share"]) for h in merged] == [
            (6, 1.2, 0.6667), (5, 0.6, 0.3333),
        ]  # fmt: skip
        out.close()

    def test_recent_samples_say_where_a_call_sat(self, tmp_path: Path) -> None:
        """Only the counts of the window; the call's place, its share, in words."""
        out = SamplesFile(tmp_path / "samples-abc-7.jsonl", {"pid": 7, "hz": 100.0})
        _flush_one(out, 5, 500, "c1")
        out.close()
        said = recent([tmp_path])["c1"]
        assert (said["share"], said["state"], said["seconds"]) == (1.0, "running", 5.0)
        assert said["text"] == (
            "in the last 10 s, 100% of its samples (5.0 s) running at "
            "test_sampling_formats.py:5 in _rows()"
        )
        assert recent([tmp_path], now=time.time() + 60) == {}  # a minute later: none recent

    def test_a_stragglers_extra_time_is_where_its_siblings_spent_none(self) -> None:
        """The place where the straggler's samples exceed its siblings' per call the most."""
        usual, extra = Frame("f", "/app/m.py", 10), Frame("f", "/app/m.py", 12)
        rows = [SampleRow((usual,), "n/1", "T", f"c{i}", "m.f", None, False, 10, 0.1)
                for i in range(4)]  # fmt: skip
        rows.append(SampleRow((extra,), "n/1", "T", "c0", "m.f", None, False, 150, 1.5))
        assert straggler_lines(rows, "m.f", "c0") == (
            "its samples: 1.50 s running at m.py:12 in f() (94% of them), where its 3 sibling "
            "calls spent 0.00 s each"
        )
        assert straggler_lines(rows, "m.f", "c9") is None


class TestNamesAndPlaces:
    """What a hot line, a straggler's place and an unmoved call name: the user's code, tidily."""

    def test_a_hot_line_is_the_users_not_an_import_or_the_kits(self) -> None:
        """Frames of ``<frozen importlib...>`` and of the kit under the user's line: not a line."""
        from raytrace_kit._output.tracebacks import KIT_DIR  # noqa: PLC0415

        user = Frame("<module>", "/app/main.py", 3)  # import pandas, or a hooked .remote()
        frozen = Frame("_path_stat", "<frozen importlib._bootstrap_external>", 147)
        kit = Frame("_hooked._remote", f"{KIT_DIR}/_driver/program.py", 229)
        rows = [
            SampleRow((user, frozen), "n1/1", "MainThread", "c1", "m.f", None, False, 60, 0.6),
            SampleRow((user, kit), "n1/1", "MainThread", "c1", "m.f", None, False, 40, 0.4),
        ]
        assert hottest_lines(rows, ["m.f"]) == {"m.f": "100% of f's running samples at main.py:3"}
        (hot,) = hot_lines(rows)
        assert (hot["file"], hot["line"], hot["share"]) == ("/app/main.py", 3, 1.0)
        ray_loading = Frame("load_actor_class", "/venv/site-packages/ray/function_manager.py", 9)
        (hot,) = hot_lines([replace(rows[0], stack=(ray_loading, frozen), function=None)])
        assert hot["name"] == "load_actor_class"  # none of the user's: a package's, not <frozen

    def test_nested_functions_are_named_without_locals(self, tmp_path: Path) -> None:
        """``work.<locals>.<genexpr>`` reads ``work.<genexpr>``, with no ``()`` after it."""

        def work() -> Any:
            return next(sys._getframe() for _ in range(1))  # the generator expression's frame

        code = work().f_code
        assert ".<locals>.<genexpr>" in code.co_qualname
        out = SamplesFile(tmp_path / "samples-abc-7.jsonl", {"pid": 7, "hz": 100.0})
        stack = out.stack((out.frame(code, 12),))
        made = out.call("c1", {"call_id": "c1", "function": "m.work", "actor_id": None})
        out.counts[stack, out.thread(1, "MainThread"), made, 0] += 300
        assert out.flush()
        out.close()
        (row,) = read_samples([out.path])
        assert row.stack[-1].name == code.co_qualname.replace(".<locals>.", ".")
        assert row.stack[-1].name.endswith("work.<genexpr>")
        said = recent([tmp_path])["c1"]["text"]
        assert said.endswith(f"running at test_sampling_formats.py:12 in {row.stack[-1].name}")

    def test_a_call_just_begun_has_not_stopped_moving(self) -> None:
        """``unmoved``: 90% of the samples at one place, running 5 s or more, no loop held."""
        from raytrace_kit._reports.stuck import (  # noqa: PLC0415
            UNMOVED_S,
            Flight,
            StuckReport,
            headline,
        )

        def flight(call_id: str, age_s: float) -> Flight:
            return Flight("running", call_id, "m.crunch", "task", "t" + call_id, call_id,
                          None, "n1", 7, age_s)  # fmt: skip

        at_one_place = {"share": 1.0, "seconds": 0.4, "text": "..."}
        young, old = flight("c1", 0.4), flight("c2", UNMOVED_S + 20)
        samples = {"c1": at_one_place, "c2": {**at_one_place, "seconds": 2.0}}
        report = StuckReport("here", time.time(), [young, old], [], [], [], [], [], [],
                             samples=samples)  # fmt: skip
        assert report.unmoved() == [old]
        assert headline(report).endswith("1 call(s) that have not moved")
        assert report.to_dict()["unmoved"][0]["call_id"] == "c2"
        report.held_loops = [{"call_id": "c2", "function": "m.crunch", "held_s": 25.0}]
        assert report.unmoved() == []  # an event loop it holds says more, and says the fix


class TestProfileSaysWhyNone:
    """``raytrace-kit profile`` choosing nothing says why, and what to give instead."""

    def _said(self, rows: list[SampleRow], **asked: Any) -> str:
        import argparse  # noqa: PLC0415

        from raytrace_kit.cli.profile import _none_said  # noqa: PLC0415

        given = {"function": None, "call": None, "node": None, "idle": False, **asked}
        return _none_said(Path("run"), [Path("run/samples-a-1.jsonl")], rows,
                          argparse.Namespace(**given))  # fmt: skip

    def test_a_function_not_sampled_lists_those_that_were(self) -> None:
        """The filter named, and the functions it could have been."""
        assert self._said(_rows(), function="nosuch") == (
            "no samples match --function nosuch in run; the sampled functions: m.crunch"
        )

    def test_a_function_whose_samples_all_wait_points_at_idle(self) -> None:
        """Every sample of the function waits: --idle would keep them."""
        waiting = [replace(row, waiting=True) for row in _rows()]
        assert self._said(waiting, function="crunch") == (
            "the samples of --function crunch all wait (--idle keeps waiting ones)"
        )
