"""Unit tier: every option's accepted and rejected values, as tables (no Ray needed)."""

from __future__ import annotations

from typing import Any

import pytest

from raytrace_kit import DebugOptions, InvalidOptionError, Pin, RaytraceKitError
from raytrace_kit._options import CallSpec, as_pin

NODE = "ab" * 28

ACCEPTED: list[tuple[str, Any, Any]] = [
    # option, given, stored
    ("log", False, False),
    ("local", True, True),
    ("local", None, None),
    ("post_mortem", True, True),
    *[("check", mode, mode) for mode in ("first", "always", "on_error", "off")],
    ("profile", "memray", "memray"),
    ("profile", "cprofile", "cprofile"),
    ("profile", None, None),
    ("pin", True, Pin()),
    ("pin", False, None),
    ("pin", NODE, Pin(node_id=NODE, process=False)),
    ("pin", Pin(node_id=NODE), Pin(node_id=NODE)),
    ("capture", "failures", "failures"),
    ("capture", None, None),
]

REJECTED: list[tuple[dict[str, Any], str]] = [
    # given, words the message must contain (the problem, then the fix)
    ({"lg": True}, "unknown raytrace_kit option 'lg'; valid options are: capture, check, local"),
    ({"num_cpus": 2}, "Ray options such as num_cpus belong in @ray.remote(...) or .options"),
    ({"log": 1}, "log=1 has type int; expected a bool"),
    ({"local": "yes"}, "expected True, False or None"),
    ({"check": "sometimes"}, "expected one of 'first', 'always', 'on_error', 'off'"),
    ({"profile": "py-spy"}, "expected 'memray', 'cprofile' or None"),
    ({"profile_scope": "process"}, "expected 'call' or 'actor'"),
    ({"profile_options": {"native_traces": True}}, "needs profile='memray' or profile='cprofile'"),
    ({"profile": "cprofile", "profile_options": {"native_traces": True}}, "valid ones are"),
    ({"profile": "memray", "profile_options": {"timeunit": 1}}, "unknown memray option(s)"),
    ({"profile_scope": "actor"}, "profile_scope='actor' needs a profiler"),
    ({"pin": 3}, "expected True, a node id string"),
    ({"capture": "all"}, "capture='all' is not valid; expected 'failures' or None"),
    ({"capture": True}, "capture=True has type bool; expected 'failures' or None"),
    (
        {"profile": "memray", "profile_options": {"file_format": "NOPE"}},
        "file_format='NOPE' is not valid: expected 'ALL_ALLOCATIONS' or 'AGGREGATED_ALLOCATIONS'",
    ),
    (
        {"profile": "memray", "profile_options": {"native_traces": "yes"}},
        "native_traces='yes' is not valid: expected True or False",
    ),
    (
        {"profile": "memray", "profile_options": {"memory_interval_ms": 0}},
        "expected a positive whole number of milliseconds",
    ),
    (
        {"profile": "cprofile", "profile_options": {"timeunit": "fast"}},
        "timeunit='fast' is not valid: expected a positive number",
    ),
    ({"pin": "node-1"}, "is not a Ray node id (56 hex digits)"),
]


class TestOptionTables:
    """DebugOptions.replace() accepts exactly the documented values."""

    @pytest.mark.parametrize(("option", "given", "stored"), ACCEPTED)
    def test_accepted(self, option: str, given: Any, stored: Any) -> None:
        """A documented value is stored in its normal form."""
        assert getattr(DebugOptions().replace(**{option: given}), option) == stored

    @pytest.mark.parametrize(("given", "words"), REJECTED)
    def test_rejected_with_the_fix(self, given: dict[str, Any], words: str) -> None:
        """Anything else is an InvalidOptionError (a TypeError) naming problem and fix."""
        with pytest.raises(InvalidOptionError) as info:
            DebugOptions().replace(**given)
        assert words in str(info.value)
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, RaytraceKitError)

    def test_profile_options_are_stored_sorted(self) -> None:
        """A dict of profiler options becomes a sorted tuple: hashable, order-independent."""
        options = {"native_traces": True, "follow_fork": False}
        b = DebugOptions().replace(profile="memray", profile_options=options)
        assert b.profile_options == (("follow_fork", False), ("native_traces", True))

    def test_as_pin_rejects_other_types(self) -> None:
        """A float is not a pin."""
        with pytest.raises(InvalidOptionError, match=r"pin=1\.5"):
            as_pin(1.5)


class TestCallSpec:
    """The spec shipped to workers renders its JSON members once, on the driver."""

    def test_fragment_is_the_json_members(self) -> None:
        """Function and kind, JSON-escaped."""
        spec = CallSpec('m.f"x', "task", DebugOptions())
        assert spec.fragment == '"function":"m.f\\"x","kind":"task"'
        assert spec == CallSpec('m.f"x', "task", DebugOptions())
