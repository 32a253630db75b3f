"""Unit tier: the event schema renders valid JSON lines in a fixed field order (no Ray)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._output import encode, submissions
from raytrace_kit._output.locals import frames_locals
from raytrace_kit._output.schema import Blocked, Call, CallStart, Stuck, Submission
from raytrace_kit._process import ProcessIdentity

IDENTITY = ProcessIdentity("01000000", "ab" * 28, "cd" * 28, 4242, is_worker=True)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


class TestCallLines:
    """call.start / call.end lines, as the worker writes them."""

    def _members(self, **changes: Any) -> str:
        fields: dict[str, Any] = {
            "call_id": "0123456789abcdef",
            "spec_fragment": encode.members({"function": "m.f", "kind": "task"}),
            "mode": "ray",
            "task_id": "ff" * 12,
            "actor_id": None,
            "identity": IDENTITY,
            "attempt": 0,
        }
        fields.update(changes)
        return encode.call_members(**fields)

    def test_start_line_fields_in_order(self) -> None:
        """The documented fields, timestamp/level/event first, ids as JSON."""
        event = json.loads(encode.call_line("call.start", "info", self._members()))
        assert list(event) == [
            "timestamp",
            "level",
            "event",
            "schema",
            "call_id",
            "parent_call_id",
            "parent_task_id",
            "function",
            "kind",
            "mode",
            "task_id",
            "task_name",
            "actor_id",
            "job_id",
            "node_id",
            "worker_id",
            "pid",
            "attempt",
        ]
        assert event["actor_id"] is None
        assert event["pid"] == 4242
        assert event["schema"] == encode.SCHEMA == 2
        assert event["parent_call_id"] is None

    def test_parent_is_split_into_call_and_task(self) -> None:
        """A parent token names the submitting call and its task."""
        line = encode.call_line("call.start", "info", self._members(parent="ab12/cd34"))
        event = json.loads(line)
        assert (event["parent_call_id"], event["parent_task_id"]) == ("ab12", "cd34")

    def test_task_name_is_encoded(self) -> None:
        """A task name is the user's text: quotes and newlines stay valid JSON."""
        line = encode.call_line("call.start", "info", self._members(task_name='a "b"\nc'))
        assert json.loads(line)["task_name"] == 'a "b"\nc'

    def test_end_members_for_an_error(self) -> None:
        """A failed call carries status, the error type and a capped message."""
        tail = encode.end_members(0.25, KeyError("x" * 5000))
        event = json.loads(encode.call_line("call.end", "error", self._members(), tail))
        assert event["status"] == "error"
        assert event["error_type"] == "KeyError"
        assert len(event["error"]) == encode.ERROR_CHARS
        assert event["duration_s"] == 0.25
        assert event["rss_bytes"] > 0
        assert event["max_rss_bytes"] >= event["rss_bytes"]
        assert event["cpu_s"] is None  # not measured: null, never a made-up figure

    def test_traceback_has_user_frames_only_and_chains(self) -> None:
        """The failing frames as Python prints them, chained causes kept, kit frames out."""

        def inner() -> None:
            raise KeyError("inner")

        try:
            try:
                inner()
            except KeyError as cause:
                raise ValueError("outer") from cause
        except ValueError as error:
            text = encode.user_traceback(error)
        assert "in inner" in text
        assert 'raise KeyError("inner")' in text
        assert "The above exception was the direct cause" in text
        assert text.rstrip().endswith("ValueError: outer")
        assert "raytrace_kit" not in text.replace("tests/unit", "")

    def test_long_traceback_is_cut_in_the_middle(self) -> None:
        """Over the cap: the start and the failing end are kept, the cut is said."""

        def fail() -> None:
            raise RuntimeError("bottom " + "x" * 20000 + " end of message")

        try:
            fail()
        except RuntimeError as error:
            text = encode.user_traceback(error)
        assert len(text) <= encode.TRACEBACK_CHARS + 64
        assert "<cut:" in text
        assert text.startswith("Traceback (most recent call last):\n")
        assert "in fail" in text
        assert text.rstrip().endswith("end of message")

    def test_profile_members(self) -> None:
        """A profiled call names its file, block and scope."""
        tail = encode.profile_members("/data/a b.bin", "blk", "actor")
        assert json.loads("{" + tail[1:] + "}") == {
            "profile_path": "/data/a b.bin",
            "profile_block": "blk",
            "profile_scope": "actor",
        }


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_event_line_round_trips(fields: dict[str, Any]) -> None:
    """Any fields render as one line of JSON that parses back; first keys come first."""
    line = encode.event_line({"event": "e", "level": "info", "timestamp": "t", **fields})
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    parsed = json.loads(line)
    assert list(parsed)[:4] == ["timestamp", "level", "event", "schema"]
    assert parsed["schema"] == encode.SCHEMA


def test_event_line_never_fails_on_odd_values() -> None:
    """Values JSON cannot hold are written as their repr."""
    parsed = json.loads(encode.event_line({"event": "e", "value": {1, 2}, "obj": object}))
    assert parsed["value"] == "{1, 2}"
    assert parsed["obj"] == "<class 'object'>"


def test_now_matches_isoformat() -> None:
    """The cached clock gives datetime's own ISO format, fixed width, in UTC."""
    text = encode.now()
    parsed = datetime.fromisoformat(text)
    assert parsed.tzinfo == timezone.utc
    assert abs((datetime.now(timezone.utc) - parsed).total_seconds()) < 5
    assert len(text) == len("2026-01-01T00:00:00.000000+00:00")


class TestArguments:
    """log_args=True: a short repr of each argument, secrets redacted, never failing."""

    def test_reprs_and_redaction(self) -> None:
        """Secret-looking keywords and dict keys are redacted; other values shown."""
        tail = encode.args_members(
            (42, {"user": "ann", "api_key": "sk-live-123", "nested": {"password": "p"}}),
            {"token": "t-999", "limit": 5},
        )
        fields = json.loads("{" + tail[1:] + "}")
        assert fields["args"][0] == "42"
        assert "'user': 'ann'" in fields["args"][1]
        for secret in ("sk-live-123", "t-999", "'p'"):
            assert secret not in tail
        assert fields["args"][1].count(encode.REDACTED) == 2
        assert fields["kwargs"] == {"token": encode.REDACTED, "limit": "5"}

    def test_long_and_broken_values(self) -> None:
        """A long repr is cut to the cap; a repr that raises is named by its type."""

        class Broken:
            def __repr__(self) -> str:
                raise RuntimeError("no")

        fields = json.loads("{" + encode.args_members(("x" * 5000, Broken()), {})[1:] + "}")
        assert len(fields["args"][0]) <= encode.ARG_CHARS
        assert "..." in fields["args"][0]
        assert fields["args"][1] == "<Broken whose __repr__ raised RuntimeError>"


class TestRedaction:
    """What log_args redacts: secret-looking names, at any depth it shows, and URL passwords."""

    def test_names(self) -> None:
        for secret in ("password", "db_pwd", "apiKey", "API_KEY", "jwt", "key", b"password"):
            assert encode.is_secret_key(secret), secret
        for plain in ("author", "passenger", "bypass", "monkey", "user", 3):
            assert not encode.is_secret_key(plain), plain

    def test_positional_nested_dataclass_and_urls(self) -> None:
        @dataclasses.dataclass
        class Config:
            user: str
            password: str

        tail = encode.args_members(
            ("s3cr3t-by-position", [{"token": "t0k"}], Config("ann", "pw-value"),
             "postgres://ann:hunter2@db:5432/x"),
            {},
            names=("password", "rows", "config", "target"),
        )  # fmt: skip
        fields = json.loads("{" + tail[1:] + "}")
        for secret in ("s3cr3t-by-position", "t0k", "pw-value", "hunter2"):
            assert secret not in tail, secret
        assert fields["args"][0] == encode.REDACTED
        assert fields["args"][2] == "Config(user='ann', password=<redacted>)"
        assert fields["args"][3] == "'postgres://ann:<redacted>@db:5432/x'"

    def test_bounded_work_on_huge_values(self) -> None:
        """A huge list is not rendered whole (reprlib's limits), and is cut to the cap."""
        tail = encode.args_members((list(range(2_000_000)),), {})
        assert len(json.loads("{" + tail[1:] + "}")["args"][0]) <= encode.ARG_CHARS


def test_clean_text_drops_kit_frames_and_colours() -> None:
    """A child's traceback text (Ray's, coloured) loses the kit's frames, keeps the user's."""
    kit = encode.KIT_DIR
    text = (
        "\x1b[36mray::child()\x1b[39m (pid=1, ip=1.2.3.4)\n"
        f'  File "{kit}/_worker/instrument.py", line 42, in task\n'
        "    return run(spec, fn, args, kwargs, parent=parent)\n"
        "           ^^^^^^^^^^\n"
        '  File "/app/job.py", line 7, in child\n'
        "    raise KeyError(x)\n"
        "KeyError: 1\n"
    )
    cleaned = encode.clean_text(text)
    assert cleaned == (
        "ray::child() (pid=1, ip=1.2.3.4)\n"
        '  File "/app/job.py", line 7, in child\n'
        "    raise KeyError(x)\n"
        "KeyError: 1\n"
    )


class TestReadersShareTheSchema:
    """The records readers decode into (_output/schema.py) name what the writer renders."""

    # Written for people and for the events listing, not kept per call by the readers.
    NOT_READ: frozenset[str] = frozenset(
        {"level", "event", "schema", "profile_block", "profile_scope"}
    )

    def _lines(self) -> tuple[dict[str, Any], dict[str, Any]]:
        members = encode.call_members(
            call_id="0123456789abcdef",
            spec_fragment=encode.members({"function": "m.f", "kind": "task"}),
            mode="ray",
            task_id="ff" * 12,
            actor_id="ee" * 16,
            identity=IDENTITY,
            attempt=1,
            task_name="m.f",
            parent="aa" * 8 + ":" + "bb" * 24,
        )
        try:
            rows = [1, 2]  # a local of the failing frame: frames_locals
            raise ValueError("bad input", rows)  # noqa: TRY301
        except ValueError as error:
            end_tail = (
                encode.end_members(
                    0.5, error, 0.1, rss_start=10, figures=(20, 15, 30), process_cpu_s=0.2
                )
                + encode.locals_members(
                    frames_locals(error, values=True),
                    path="replay/c.replay",
                    missing=None,
                    state_missing="its state: a lock",
                )
                + encode.profile_members("profiles/p.bin", "block", "call")
            )
        start = encode.call_line("call.start", "info", members, encode.memory_members((20, 15, 30)))
        end = encode.call_line("call.end", "error", members, end_tail)
        return json.loads(start), json.loads(end)

    def test_every_field_written_is_a_field_read(self) -> None:
        """A field the writer adds or renames without the readers fails here."""
        read = {field.encode_name for field in msgspec.structs.fields(Call)}
        for event in self._lines():
            assert set(event) - self.NOT_READ <= read, set(event) - self.NOT_READ - read

    def test_an_end_line_decodes_to_the_call_users_see(self) -> None:
        """call.end decodes into Call with its values, not its defaults."""
        _, end = self._lines()
        call = msgspec.json.decode(json.dumps(end), type=Call)
        assert (call.function, call.status, call.error_type) == ("m.f", "error", "ValueError")
        assert call.frames_locals is not None
        *_, described, shown = call.frames_locals[-1]
        assert (described["rows"], shown["rows"]) == ("list of 2", "[1, 2]")
        kept = (call.replay_path, call.replay_state_missing)
        assert kept == ("replay/c.replay", "its state: a lock")
        assert call.replay_missing is None
        assert (call.rss_start_bytes, call.rss_end_bytes, call.rss_growth_bytes) == (10, 20, 10)
        assert (call.task_id, call.attempt, call.parent_call_id) == (
            "ff" * 12,
            1,
            end["parent_call_id"],
        )
        start = msgspec.json.decode(json.dumps(self._lines()[0]), type=CallStart)
        assert (start.call_id, start.rss_bytes) == ("0123456789abcdef", 20)


class TestFlightLines:
    """call.submit and call.stuck, rendered by the writer's own functions, decode as readers do."""

    def test_submit_line_decodes_into_a_submission(self) -> None:
        """Every field the stuck doctor reads survives the round trip."""
        prefix = submissions.submit_prefix(
            "m.A.__init__", "actor_init", {"CPU": 1.0, "GPU": 0.5}, "node:ab soft",
            {"max_concurrency": 4, "async": True},
        )  # fmt: skip
        line = submissions.submit_line(
            1_800_000_000.25, prefix, "ee" * 24, "aa" * 16, "0123456789abcdef/" + "ff" * 24,
            IDENTITY, "/app/job.py:12", ["11" * 24],
        )  # fmt: skip
        record = msgspec.json.decode(line, type=Submission)
        assert record == Submission(
            task_id="ee" * 24, function="m.A.__init__", kind="actor_init",
            timestamp="2027-01-15T08:00:00.250000+00:00", actor_id="aa" * 16,
            parent_call_id="0123456789abcdef", parent_task_id="ff" * 24, job_id="01000000",
            node_id="ab" * 28, pid=4242, site="/app/job.py:12",
            resources={"CPU": 1.0, "GPU": 0.5}, scheduling="node:ab soft", max_concurrency=4,
            is_async=True, arg_task_ids=["11" * 24],
        )  # fmt: skip
        assert list(json.loads(line))[:4] == ["timestamp", "level", "event", "schema"]

    def test_blocked_line_decodes_into_a_blocked_event(self) -> None:
        """The call's members, then how long it held its loop and where."""
        members = encode.call_members(
            call_id="0123456789abcdef",
            spec_fragment=encode.members({"function": "m.A.f", "kind": "actor_method"}),
            mode="ray", task_id="ff" * 24, actor_id="ab" * 16, identity=IDENTITY, attempt=0,
        )  # fmt: skip
        stack = [("/app/job.py", 9, "f", "time.sleep(0.3)")]
        tail = encode.blocked_members(0.3004, "AsyncIO Thread: default", stack)
        event = msgspec.json.decode(
            encode.call_line("call.blocked", "warning", members, tail), type=Blocked
        )
        assert (event.call_id, event.function, event.actor_id) == (
            "0123456789abcdef", "m.A.f", "ab" * 16,
        )  # fmt: skip
        assert (event.held_s, event.where, event.thread) == (
            0.3, "/app/job.py:9", "AsyncIO Thread: default",
        )  # fmt: skip
        assert event.stack == [["/app/job.py", 9, "f", "time.sleep(0.3)"]]

    def test_stuck_line_decodes_into_a_stuck_event(self) -> None:
        """The call's members, then where it was and what it waited on."""
        members = encode.call_members(
            call_id="0123456789abcdef",
            spec_fragment=encode.members({"function": "m.f", "kind": "task"}),
            mode="ray", task_id="ff" * 24, actor_id=None, identity=IDENTITY, attempt=0,
        )  # fmt: skip
        tail = encode.stuck_members(
            61.5, 60.0, 1, "MainThread", [("/app/job.py", 9, "f", "time.sleep(3600)")],
            {"what": "ray.get", "refs": 1, "task_ids": ["aa" * 24]},
        )  # fmt: skip
        event = msgspec.json.decode(
            encode.call_line("call.stuck", "warning", members, tail), type=Stuck
        )
        assert (event.call_id, event.function, event.running_s, event.report) == (
            "0123456789abcdef", "m.f", 61.5, 1,
        )  # fmt: skip
        assert event.stack == [["/app/job.py", 9, "f", "time.sleep(3600)"]]
        assert event.waiting_on == {"what": "ray.get", "refs": 1, "task_ids": ["aa" * 24]}
