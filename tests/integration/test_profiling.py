"""Tests for profiling: per-call memray and cProfile, blocks, flame graphs, merged stats."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from pathlib import Path

import memray
import pytest
import ray
from hypothesis import given
from hypothesis import strategies as st

import raytrace_kit
from raytrace_kit import (
    InvalidOptionError,
    RaytraceKitWarning,
    cpu_stats,
    debuggable,
    flamegraph,
    profile_cpu,
    profile_memory,
)
from raytrace_kit._output.paths import sanitize as _sanitize
from tests import helpers
from tests.helpers import events_of

pytestmark = pytest.mark.usefixtures("ray_session")

MIB = 1024 * 1024


@debuggable(profile="memray")
@ray.remote
def allocate(mib: int) -> int:
    data = bytearray(mib * MIB)
    return len(data)


@debuggable(profile="cprofile")
@ray.remote
def hot_loop(n: int) -> int:
    return sum(i * i for i in range(n))


def sidecar(path: str) -> dict[str, object]:
    return json.loads(Path(path).with_suffix(".json").read_text())


class TestPerCall:
    """Each profiled execution writes one file, a sidecar, and names it in call.end."""

    @pytest.mark.compat
    def test_memray_task_files_sidecars_and_peak(self) -> None:
        """A task allocating 100 MiB: one capture per call, peak within 10%."""
        assert ray.get(allocate.remote(100)) == 100 * MIB
        (end,) = events_of(allocate, "call.end")
        path = Path(end["profile_path"])
        assert path.parent == raytrace_kit.log_dir() / "profiles"
        assert path.suffix == ".bin"
        meta = sidecar(str(path))
        assert meta["call_id"] == end["call_id"]
        assert meta["task_id"] == end["task_id"]
        assert meta["node_id"] == end["node_id"]
        assert meta["pid"] == end["pid"]
        assert meta["status"] == "ok"
        peak = meta["peak_memory_bytes"]
        assert isinstance(peak, int)
        assert abs(peak - 100 * MIB) <= 10 * MIB
        reader = memray.FileReader(str(path))
        assert abs(reader.metadata.peak_memory - 100 * MIB) <= 10 * MIB
        reader.close()

    def test_reused_worker_writes_one_file_per_call(self) -> None:
        """Several calls in one worker process give several distinct files."""
        single = allocate.options(num_cpus=2)  # one at a time: likely the same worker
        for _ in range(3):
            ray.get(single.remote(1))
        ends = events_of(allocate, "call.end")
        paths = {e["profile_path"] for e in ends}
        assert len(paths) == 3
        assert all(Path(p).exists() for p in paths)
        by_pid: dict[int, int] = {}
        for end in ends:
            by_pid[end["pid"]] = by_pid.get(end["pid"], 0) + 1
        assert max(by_pid.values()) >= 2  # a reused worker did not overwrite its files

    def test_retries_get_their_own_files(self) -> None:
        """Each attempt of a retried task has its own file (the attempt is in the name)."""

        @debuggable(profile="memray")
        @ray.remote(max_retries=1, retry_exceptions=True)
        def flaky(marker: str) -> str:
            if not os.path.exists(marker):
                Path(marker).touch()
                raise ValueError("first attempt fails")
            return "ok"

        marker = f"/tmp/raytrace-kit-profile-retry-{os.getpid()}-{time.time_ns()}"  # noqa: S108
        try:
            assert ray.get(flaky.remote(marker)) == "ok"
        finally:
            Path(marker).unlink()
        ends = events_of(flaky, "call.end")
        assert [e["attempt"] for e in ends] == [0, 1]
        first, second = (Path(e["profile_path"]) for e in ends)
        assert first != second
        assert ".a0." in first.name
        assert ".a1." in second.name
        assert sidecar(str(first))["status"] == "error"
        assert sidecar(str(second))["status"] == "ok"

    @pytest.mark.compat
    def test_actor_init_and_methods(self) -> None:
        """__init__ and each method call of a profiled actor get their own capture."""

        @debuggable(profile="memray")
        @ray.remote
        class Cache:
            def __init__(self) -> None:
                self.blob = bytearray(5 * MIB)

            def grow(self) -> int:
                self.blob += bytearray(MIB)
                return len(self.blob)

        cache = Cache.remote()
        assert ray.get([cache.grow.remote(), cache.grow.remote()]) == [6 * MIB, 7 * MIB]
        ends = events_of(Cache, "call.end")
        assert [e["kind"] for e in ends] == ["actor_init", "actor_method", "actor_method"]
        assert len({e["profile_path"] for e in ends}) == 3
        assert sidecar(ends[0]["profile_path"])["peak_memory_bytes"] >= 5 * MIB
        ray.kill(cache)

    def test_cpu_stats_over_20_calls(self) -> None:
        """cpu_stats() merges 20 per-call cProfile files: the hot function has 20 calls."""
        ray.get([hot_loop.remote(20_000) for _ in range(20)])
        files = [Path(e["profile_path"]) for e in events_of(hot_loop, "call.end")]
        assert len(files) == 20
        assert all(f.suffix == ".prof" for f in files)
        stats = cpu_stats(files)
        assert stats.calls("hot_loop") == 20
        assert "hot_loop" in str(stats)
        row = next(r for r in helpers.table_rows(stats._repr_html_()) if "hot_loop" in r)
        assert row[0] == "20"  # calls, as in a notebook's table

    def test_threaded_actor_one_tracker_at_a_time(self) -> None:
        """4 concurrent profiled calls: one profiled, three skipped with events; all correct."""

        @debuggable(profile="memray")
        @ray.remote(max_concurrency=4)
        class Parallel:
            def __init__(self) -> None:
                self.barrier = threading.Barrier(4)

            def work(self, i: int) -> int:
                self.barrier.wait(timeout=30)  # all four calls run at once
                time.sleep(0.2)
                return i * 2

        profiled = Parallel.remote()
        ray.get(profiled.__ray_ready__.remote())
        assert sorted(ray.get([profiled.work.remote(i) for i in range(4)])) == [0, 2, 4, 6]
        work_ends = [e for e in events_of(Parallel, "call.end") if e["function"].endswith("work")]
        assert len(work_ends) == 4
        assert sum("profile_path" in e for e in work_ends) == 1
        skipped = [
            e for e in raytrace_kit.read_events()
            if e["event"] == "profile.skipped" and e["function"].endswith("Parallel.work")
        ]  # fmt: skip
        assert len(skipped) == 3
        assert "another memray profiler is active" in skipped[0]["reason"]
        ray.kill(profiled)

    def test_flamegraph_names_the_allocating_function(self, tmp_path: Path) -> None:
        """flamegraph() writes memray's HTML flame graph, which names the allocator."""
        ray.get(allocate.remote(20))
        (end,) = events_of(allocate, "call.end")
        html = flamegraph(end["profile_path"], out=tmp_path / "flame.html")
        assert html == tmp_path / "flame.html"
        text = html.read_text()
        assert "<html" in text.lower()
        assert "allocate" in text

    def test_actor_scope_captures_the_whole_life(self) -> None:
        """profile_scope='actor': one capture from __init__ to exit, with method allocations."""

        @debuggable(profile="memray", profile_scope="actor")
        @ray.remote
        class Leaky:
            def __init__(self) -> None:
                self.kept: list[bytearray] = []

            def leak(self, mib: int) -> int:
                self.kept.append(bytearray(mib * MIB))
                return len(self.kept)

        leaky = Leaky.remote()
        assert ray.get([leaky.leak.remote(10) for _ in range(3)]) == [1, 2, 3]
        ends = events_of(Leaky, "call.end")
        assert [("profile_path" in e) for e in ends] == [True, False, False, False]
        path = ends[0]["profile_path"]
        leaky.__ray_terminate__.remote()  # a clean exit lets the capture finish
        deadline = time.monotonic() + 30
        while True:
            try:
                reader = memray.FileReader(path)
                break
            except OSError:
                assert time.monotonic() < deadline, "the actor's capture never completed"
                time.sleep(0.2)
        assert reader.metadata.peak_memory >= 30 * MIB
        reader.close()

    def test_memray_missing_on_a_worker_runs_unprofiled(self, tmp_path: Path) -> None:
        """A worker where memray cannot be imported: the call runs, with profile.skipped."""
        shadow = tmp_path / "memray"
        shadow.mkdir()
        (shadow / "__init__.py").write_text("raise ImportError('memray is broken here')\n")
        broken = allocate.options(runtime_env={"env_vars": {"PYTHONPATH": str(tmp_path)}})
        assert ray.get(broken.remote(1)) == MIB
        (end,) = events_of(allocate, "call.end")
        assert end["status"] == "ok"
        assert "profile_path" not in end
        skipped = [e for e in raytrace_kit.read_events() if e["event"] == "profile.skipped"]
        assert "memray is broken here" in skipped[-1]["reason"]


class TestBlocks:
    """profile_memory() and profile_cpu() work anywhere and travel with calls."""

    def test_profile_memory_on_the_driver(self) -> None:
        """A block on the driver: a capture with its peak and top allocation site."""
        with profile_memory() as p:
            buffer = bytearray(30 * MIB)
        del buffer
        assert p.path is not None
        assert p.path.exists()
        summary = p.summary()
        assert abs((summary.peak_memory_bytes or 0) - 30 * MIB) <= 5 * MIB
        assert summary.top[0]["function"] == "test_profile_memory_on_the_driver"
        assert "peak memory" in str(summary)

    @pytest.mark.compat
    def test_profile_cpu_on_the_driver(self, tmp_path: Path) -> None:
        """A cProfile block writes the named file; the summary ranks by cumulative time."""

        def busy() -> int:
            return sum(i for i in range(200_000))

        with profile_cpu(tmp_path / "block.prof") as p:
            busy()
        assert p.path == tmp_path / "block.prof"
        names = [row["function"] for row in p.summary(top=5).top]
        assert "busy" in names

    @pytest.mark.compat
    def test_profile_cpu_keeps_to_its_thread(self, tmp_path: Path) -> None:
        """Another thread's calls stay out of a block's profile (3.12+ cProfile sees all)."""
        inside, ran = threading.Event(), threading.Event()

        def elsewhere() -> int:
            return len(str(12345))

        def other_thread() -> None:
            inside.wait()
            for _ in range(1000):
                elsewhere()
            ran.set()

        def busy() -> int:
            return sum(i for i in range(200_000))

        thread = threading.Thread(target=other_thread, daemon=True)
        thread.start()
        with profile_cpu(tmp_path / "block.prof") as p:
            busy()
            inside.set()
            ran.wait()  # the other thread's 1,000 calls ran while the block profiled
        thread.join()
        names = {row["function"] for row in p.summary(top=100).top}
        assert "busy" in names
        assert "elsewhere" not in names
        assert "other_thread" not in names

    def test_profile_memory_inside_a_task(self) -> None:
        """A block inside a (plain) task profiles in that worker."""

        @ray.remote
        def inside() -> tuple[str, int]:
            with profile_memory() as p:
                data = bytearray(10 * MIB)
            assert p.path is not None
            return str(p.path), len(data)

        path, size = ray.get(inside.remote())
        assert size == 10 * MIB
        assert Path(path).exists()

    def test_block_propagates_to_debuggable_calls(self) -> None:
        """Calls submitted inside a driver block are profiled in their workers."""

        @debuggable
        @ray.remote
        def unprofiled(mib: int) -> int:
            return len(bytearray(mib * MIB))

        with profile_memory() as p:
            assert ray.get([unprofiled.remote(1), unprofiled.remote(2)]) == [MIB, 2 * MIB]
        files = p.remote_profiles
        assert len(files) == 2
        assert all(f.exists() and f.suffix == ".bin" for f in files)
        assert all(sidecar(str(f))["profile_block"] == p.id for f in files)
        ray.get(unprofiled.remote(1))  # after the block: not profiled
        assert "profile_path" not in events_of(unprofiled, "call.end")[-1]

    def test_nested_memory_block_runs_unprofiled_and_warns(self) -> None:
        """A second memray block in the same process never raises: it warns and skips."""
        with (
            profile_memory() as outer,
            pytest.warns(RaytraceKitWarning, match="unprofiled"),
            profile_memory() as inner,
        ):
            pass
        assert outer.path is not None
        assert inner.path is None
        with pytest.raises(FileNotFoundError, match="unprofiled"):
            inner.summary()


class TestOptions:
    """Profiling options are validated at decoration."""

    def test_profile_options_must_fit_the_profiler(self) -> None:
        """Memray's options go with memray, cProfile's with cProfile."""
        debuggable(profile="memray", profile_options={"native_traces": False})
        with pytest.raises(InvalidOptionError, match="unknown memray option"):
            debuggable(profile="memray", profile_options={"subcalls": True})
        with pytest.raises(InvalidOptionError, match="needs profile="):
            debuggable(profile_options={"native_traces": True})
        with pytest.raises(InvalidOptionError, match="'memray', 'cprofile' or None"):
            debuggable(profile="py-spy")

    def test_actor_scope_needs_a_profiler_and_an_actor_class(self) -> None:
        """profile_scope='actor' alone, or on a function, would do nothing: an error."""
        with pytest.raises(InvalidOptionError, match="needs a profiler"):
            debuggable(profile_scope="actor")
        with pytest.raises(InvalidOptionError, match="applies to actor classes"):
            debuggable(profile="memray", profile_scope="actor")(ray.remote(lambda: 1))

    def test_memray_options_reach_the_tracker(self) -> None:
        """file_format=AGGREGATED_ALLOCATIONS is applied in the worker."""
        aggregated = allocate.with_debug(profile_options={"file_format": "AGGREGATED_ALLOCATIONS"})
        ray.get(aggregated.remote(1))
        (end,) = events_of(allocate, "call.end")
        reader = memray.FileReader(end["profile_path"])
        assert reader.metadata.file_format == memray.FileFormat.AGGREGATED_ALLOCATIONS
        reader.close()


@given(st.text(min_size=1, max_size=300))
def test_profile_names_are_safe_and_bounded(text: str) -> None:
    """Sanitized names use safe characters only, and at most 80 of them."""
    name = _sanitize(text)
    assert 0 < len(name) <= 80
    assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)
    assert "/" not in name


def build_buffer(mib: int) -> bytearray:
    """The allocating function a user looks for in a memory profile."""
    return bytearray(mib * MIB)


BUILD_LINE = build_buffer.__code__.co_firstlineno + 2  # the `return bytearray(...)` line


def biggest_stack(path: str | Path) -> list[tuple[str, str, int]]:
    """(function, file, line) of the largest allocation at the peak, innermost first."""
    reader = memray.FileReader(str(path))
    try:
        records = reader.get_high_watermark_allocation_records(merge_threads=True)
        biggest = max(records, key=lambda record: record.size)
        return list(biggest.stack_trace())
    finally:
        reader.close()


def assert_names_the_allocator(path: str | Path, caller: str) -> None:
    """The biggest record's stack: build_buffer at its line, called from ``caller``."""
    stack = biggest_stack(path)
    functions = [frame[0] for frame in stack]
    assert functions[0] == "build_buffer", stack
    assert stack[0][2] == BUILD_LINE
    assert stack[0][1].endswith("test_profiling.py")
    assert caller in functions, stack


@debuggable(profile="memray")
@ray.remote
def builds_in_a_task(mib: int) -> int:
    return len(build_buffer(mib))


def drawn(page: str) -> tuple[list[tuple[str, str, int]], list[str]]:
    """What a memray flame graph page draws, read from its embedded data.

    Every frame under the root as (function, file, line), and the root's children's names.
    """
    data = json.loads(re.search(r"const packed_data = (\{.*?\});\n", page, re.S)[1])
    nodes, strings = data["nodes"], data["strings"]
    frames, todo = [], list(nodes["children"][0])
    while todo:
        index = todo.pop()
        name, file = strings[nodes["function"][index]], strings[nodes["filename"][index]]
        frames.append((name, file, nodes["lineno"][index]))
        todo.extend(nodes["children"][index])
    return frames, [strings[nodes["function"][i]] for i in nodes["children"][0]]


@debuggable(profile="memray", stuck_after=0.05)
@ray.remote
def builds_while_reported_stuck(mib: int, log_dir: str) -> int:
    """Allocates, then waits until the kit's thread has reported it stuck (and allocated).

    The event files are read as plain files: the kit's own readers, called here, would be
    frames of the kit's in the call's flame graph, rightly.
    """
    data = build_buffer(mib)
    mark = b'"event":"call.stuck"'
    name = f'"function":"{__name__}.builds_while_reported_stuck"'.encode()
    for _ in range(6000):  # at most a minute: the report comes within 0.1 s on a quiet machine
        for path in Path(log_dir).glob("events-*.jsonl"):
            if any(mark in line and name in line for line in path.read_bytes().splitlines()):
                return len(data)
        time.sleep(0.01)
    return len(data)


@debuggable(profile="memray")
@ray.remote
def builds_in_a_generator(mib: int):  # type: ignore[no-untyped-def]  # a generator task
    yield len(build_buffer(mib))


class TestMemrayStacks:
    """memray captures name the user's allocating function and line, wherever it ran."""

    @pytest.mark.compat
    def test_task(self) -> None:
        """A task's capture: build_buffer, called from the task function."""
        assert ray.get(builds_in_a_task.remote(20)) == 20 * MIB
        (end,) = events_of(builds_in_a_task, "call.end")
        assert_names_the_allocator(end["profile_path"], "builds_in_a_task")
        top = raytrace_kit.profile_summary(end["profile_path"]).top[0]
        assert (top["function"], top["line"]) == ("build_buffer", BUILD_LINE)
        assert top["callers"][0][0] == "builds_in_a_task"
        assert "called from builds_in_a_task (test_profiling.py:" in str(
            raytrace_kit.profile_summary(end["profile_path"])
        )

    def test_generator_task(self) -> None:
        """A generator task's capture too."""
        assert [ray.get(r) for r in builds_in_a_generator.remote(20)] == [20 * MIB]
        (end,) = events_of(builds_in_a_generator, "call.end")
        assert_names_the_allocator(end["profile_path"], "builds_in_a_generator")

    @pytest.mark.compat
    def test_sync_and_async_actor_methods(self) -> None:
        """Sync and async methods of one actor, each its own capture with its frames."""

        @debuggable(profile="memray")
        @ray.remote
        class Builder:
            def build(self, mib: int) -> int:
                return len(build_buffer(mib))

            async def build_async(self, mib: int) -> int:
                await asyncio.sleep(0)
                return len(build_buffer(mib))

        builder = Builder.remote()
        assert ray.get(builder.build.remote(20)) == 20 * MIB
        assert ray.get(builder.build_async.remote(20)) == 20 * MIB
        ends = {e["function"].rsplit(".", 1)[-1]: e for e in events_of(Builder, "call.end")}
        assert_names_the_allocator(ends["build"]["profile_path"], "build")
        assert_names_the_allocator(ends["build_async"]["profile_path"], "build_async")
        ray.kill(builder)

    def test_native_traces(self) -> None:
        """native_traces=True: the records carry native frames as well."""
        task = builds_in_a_task.with_debug(profile_options={"native_traces": True})
        ray.get(task.remote(20))
        (end,) = events_of(builds_in_a_task, "call.end")
        assert_names_the_allocator(end["profile_path"], "builds_in_a_task")
        reader = memray.FileReader(end["profile_path"])
        biggest = max(
            reader.get_high_watermark_allocation_records(merge_threads=True),
            key=lambda record: record.size,
        )
        native = [frame[0] for frame in biggest.native_stack_trace()]
        reader.close()
        assert native
        assert any("malloc" in name or "Py" in name for name in native)

    def test_local_mode_call(self) -> None:
        """A local call's capture, taken in this process."""
        with raytrace_kit.local_mode():
            assert ray.get(builds_in_a_task.remote(20)) == 20 * MIB
        (end,) = events_of(builds_in_a_task, "call.end")
        assert end["mode"] == "local"
        assert_names_the_allocator(end["profile_path"], "builds_in_a_task")

    def test_block_names_its_own_frame_and_its_callees(self) -> None:
        """A profile_memory() block: allocations in the block's own frame and below."""

        def block_body() -> tuple[Path, Path]:
            with profile_memory() as direct:
                kept = bytearray(30 * MIB)
            del kept
            with profile_memory() as called:
                build_buffer(30)
            assert direct.path is not None
            assert called.path is not None
            return direct.path, called.path

        direct, called = block_body()
        assert biggest_stack(direct)[0][0] == "block_body"
        assert_names_the_allocator(called, "block_body")

    def test_flamegraph_renders_offline_with_the_frames(self, tmp_path: Path) -> None:
        """The HTML loads no script from a CDN and its data names the allocating function."""
        ray.get(builds_in_a_task.remote(20))
        (end,) = events_of(builds_in_a_task, "call.end")
        page = flamegraph(end["profile_path"], out=tmp_path / "flame.html").read_text()
        external = re.findall(r"<(?:script|link)[^>]*(?:src|href)=[\"']?https?://", page)
        assert external == []
        assert "build_buffer" in page
        assert "builds_in_a_task" in page
        # The graph starts at the user's function: no frame of the kit's under the root.
        frames, tops = drawn(page)
        assert not [frame for frame in frames if "raytrace_kit" in frame[1]]
        assert tops == ["builds_in_a_task"]

    def test_flamegraph_leaves_out_the_kits_threads(self, tmp_path: Path) -> None:
        """The kit's thread, reporting the call stuck as it runs, is not in its flame graph."""
        log_dir = str(raytrace_kit.log_dir())
        assert ray.get(builds_while_reported_stuck.remote(8, log_dir)) == 8 * MIB
        (stuck, *_) = events_of(builds_while_reported_stuck, "call.stuck")
        (end,) = events_of(builds_while_reported_stuck, "call.end")
        assert stuck["call_id"] == end["call_id"]  # reported while memray tracked it
        page = flamegraph(end["profile_path"], out=tmp_path / "flame.html").read_text()
        frames, tops = drawn(page)
        assert not [frame for frame in frames if "raytrace_kit" in frame[1]]
        # Under the root, the call's own lines only (memray draws a node per line).
        assert set(tops) == {"builds_while_reported_stuck"}


class TestUserTrackers:
    """A program's own memray Tracker and the kit's: one at a time, never a crash of ours."""

    def test_program_tracker_first_kit_capture_skipped(self, tmp_path: Path) -> None:
        """The kit finds the program's tracker active: profile.skipped, the call goes on."""
        with memray.Tracker(str(tmp_path / "mine.bin")), raytrace_kit.local_mode():
            assert ray.get(builds_in_a_task.remote(20)) == 20 * MIB
        (skipped,) = [e for e in raytrace_kit.read_events() if e["event"] == "profile.skipped"][-1:]
        assert skipped["function"].endswith("builds_in_a_task")
        assert "memray Tracker of the program is already active" in skipped["reason"]
        (end,) = events_of(builds_in_a_task, "call.end")
        assert end["status"] == "ok"
        assert "profile_path" not in end
        assert_names_the_allocator(tmp_path / "mine.bin", "builds_in_a_task")

    def test_program_tracker_first_block_runs_unprofiled(self, tmp_path: Path) -> None:
        """profile_memory() inside the program's own tracker warns instead of raising."""
        with memray.Tracker(str(tmp_path / "mine.bin")):
            with pytest.warns(RaytraceKitWarning, match="runs unprofiled"), profile_memory() as p:
                build_buffer(1)
            assert p.path is None

    def test_kit_capture_first_program_tracker_gets_memrays_error(self) -> None:
        """Documented limit: inside a profiled call, the program's Tracker gets memray's error."""

        @debuggable(profile="memray")
        @ray.remote
        def starts_its_own(path: str) -> str:
            try:
                with memray.Tracker(path):
                    pass
            except RuntimeError as error:
                return str(error)
            return "started"

        message = ray.get(starts_its_own.remote(os.devnull))
        assert "No more than one Tracker instance can be active" in message
