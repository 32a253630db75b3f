"""Each call's function by its call id, as a report keeps it: in memory, 4 bytes a call."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._reports.names import CallNames

PREFIXES = ["0123456789", "abcdefabcd", "ffffffffff", "0000000000"]
FUNCTIONS = ["jobs.a", "jobs.b", "pkg.Actor.method"]

kit_ids = st.builds(
    lambda prefix, counter: f"{prefix}{counter:06x}",
    st.sampled_from(PREFIXES),
    st.one_of(st.integers(0, 3000), st.integers(0, 0xFFFFFF)),  # dense, and far apart
)
other_ids = st.one_of(
    st.text(max_size=20),  # another writer's ids
    st.sampled_from(
        ["-123456789abcdef", "+123456789abcdef", "1_23456789abcdef", " 1234567890abcde"]
    ),
)


class TestCallNames:
    """Any call added is named back; no other id is."""

    @given(st.lists(st.tuples(st.one_of(kit_ids, other_ids), st.sampled_from(FUNCTIONS))))
    def test_every_call_added_is_named_back(self, calls: list[tuple[str, str]]) -> None:
        """Kit-shaped ids in any order, near or far apart, and ids of any other shape."""
        names = CallNames()
        expected: dict[str, str] = {}
        for call_id, function in calls:
            names.add(call_id, function)
            expected[call_id] = function
        for call_id, function in expected.items():
            assert names.get(call_id) == function

    def test_an_unknown_call_has_no_name(self) -> None:
        """Ids never added, of the kit's shape or not, next to ones that were."""
        names = CallNames()
        names.add("0123456789000005", "jobs.a")
        assert names.get("0123456789000006") is None
        assert names.get("0123456789000004") is None
        assert names.get("9999999999000005") is None
        assert names.get("p1") is None

    def test_a_process_of_a_million_calls_costs_an_array(self) -> None:
        """Dense counters go in arrays (4 bytes a call), not in the dict of other ids."""
        names = CallNames()
        for counter in range(100_000):
            names.add(f"0123456789{counter:06x}", FUNCTIONS[counter % 3])
        assert not names.others
        assert names.get(f"0123456789{99_999:06x}") == FUNCTIONS[99_999 % 3]
