"""The report's one pass over files written by the kit's own renderer and writer."""

from __future__ import annotations

from pathlib import Path

import raytrace_kit
from raytrace_kit._output import encode
from raytrace_kit._output.writer import EventWriter
from raytrace_kit._process import ProcessIdentity

NODE = "ab" * 28


def _write(
    directory: Path,
    pid: int,
    calls: list[tuple[str, str, str | None, float]],
    process_cpu: float | None = None,
) -> None:
    """One process's file: (call id, function, parent call id, seconds) per call, in turn."""
    identity = ProcessIdentity("01000000", NODE, f"{pid:02d}" * 28, pid, is_worker=True)
    writer = EventWriter(directory / f"events-{NODE[:12]}-{pid}.jsonl")
    for call_id, function, parent, seconds in calls:
        members = encode.call_members(
            call_id=call_id,
            spec_fragment=encode.members({"function": function, "kind": "task"}),
            mode="ray",
            task_id=call_id + "ff" * 16,
            actor_id=None,
            identity=identity,
            attempt=0,
            parent=f"{parent}/{'ee' * 24}" if parent else None,
        )
        figures = (100 * 2**20, 50 * 2**20, 100 * 2**20)
        writer.write(
            encode.call_line("call.start", "info", members, encode.memory_members(figures))
        )
        tail = encode.end_members(
            seconds, None, None, rss_start=figures[0], figures=figures, process_cpu_s=process_cpu
        )
        writer.write(encode.call_line("call.end", "info", members, tail))
    writer.close()


def test_a_parent_read_before_its_children_is_still_named(tmp_path: Path) -> None:
    """A parent read before its children is named from memory, by its call id.

    The report keeps each call's function at its id's place (4 bytes a call), so no file
    is read again to name it.
    """
    # Sorted by name, pid 1000's file (the parent's) is read before pid 2000's (the kids').
    _write(tmp_path, 1000, [("aaaaaaaaaa000001", "jobs.driver_loop", None, 0.0)])
    # The children's end times are real (written now) but their durations are 0: they
    # never overlap, one after the other, as the ray.get-in-a-loop pattern runs them.
    _write(
        tmp_path,
        2000,
        [(f"bbbbbbbbbb{i:06x}", "jobs.step", "aaaaaaaaaa000001", 0.0) for i in range(6)],
    )
    made = raytrace_kit.report(tmp_path)
    titles = [f.title for f in made.findings]
    assert "Calls submitted and waited on one at a time by jobs.driver_loop" in titles
    assert made.overview["calls"] == 7
    assert made.overview["processes"] == 2


class TestCpuOversubscription:
    """More CPU than wall time in a call: several threads per call, one CPU asked for."""

    def test_a_call_busy_on_three_cpus_is_named(self, tmp_path: Path) -> None:
        """Process CPU 3 s in 1 s of wall time: the finding, its subject and its fix."""
        _write(tmp_path, 1000, [("cccccccccc000001", "jobs.train", None, 1.0)], process_cpu=3.0)
        (finding,) = [
            f for f in raytrace_kit.report(tmp_path).findings if f.kind == "cpu_oversubscription"
        ]
        assert finding.subject == "jobs.train"
        assert "up to 3.0 CPUs" in finding.evidence
        assert "OMP_NUM_THREADS" in finding.fix

    def test_a_call_within_its_cpu_is_not(self, tmp_path: Path) -> None:
        """1.2 CPUs (a thread of the library's, briefly) is below the rule's 1.5."""
        _write(tmp_path, 1000, [("cccccccccc000002", "jobs.train", None, 1.0)], process_cpu=1.2)
        made = raytrace_kit.report(tmp_path)
        assert not [f for f in made.findings if f.kind == "cpu_oversubscription"]
