"""Each call's function by its call id, as a report keeps it: in memory, 8 bytes a call."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raytrace_kit._reports.run import CallNames

FUNCTIONS = ["jobs.a", "jobs.b", "pkg.Actor.method"]

kit_ids = st.builds(
    lambda prefix, counter: f"{prefix}{counter:06x}",
    st.sampled_from(["0123456789", "abcdefabcd", "ffffffffff", "0000000000"]),
    st.integers(0, 0xFFFFFF),
)
other_ids = st.one_of(
    st.text(max_size=20),  # another writer's ids
    st.sampled_from(
        ["0123456789 abcde", "-123456789abcdef", "0x23456789abcdef", "ABCDEF0123456789"]
    ),
)


def _added(names: CallNames, calls: list[tuple[str, str]], pack_at: set[int]) -> dict[str, str]:
    expected: dict[str, str] = {}
    for index, (call_id, function) in enumerate(calls):
        names.ids_of(function).append(call_id)
        expected[call_id] = function
        if index in pack_at:
            names.pack()
    return expected


class TestCallNames:
    """Any call added is named back; no other id is."""

    @given(
        st.dictionaries(st.one_of(kit_ids, other_ids), st.sampled_from(FUNCTIONS)),
        st.sets(st.integers(0, 50)),
    )
    def test_every_call_added_is_named_back(self, calls: dict[str, str], pack_at: set[int]) -> None:
        """Ids of the kit's shape and of any other, packed at any point or not at all."""
        names = CallNames()
        expected = _added(names, list(calls.items()), pack_at)
        assert names.names_of(list(expected)) == expected

    def test_an_unknown_call_has_no_name(self) -> None:
        """Ids never added, of the kit's shape or not, next to ones that were."""
        names = CallNames()
        _added(names, [("0123456789000005", "jobs.a"), ("p1", "jobs.b")], set())
        unknown = ["0123456789000006", "9999999999000005", "p2", ""]
        assert names.names_of([*unknown, "p1", "0123456789000005"]) == {
            "p1": "jobs.b",
            "0123456789000005": "jobs.a",
        }

    def test_ids_of_the_kit_are_packed_8_bytes_each(self) -> None:
        """Packed: no string kept per call, and none in the dict of other ids."""
        names = CallNames()
        calls = [(f"0123456789{n:06x}", FUNCTIONS[n % 3]) for n in range(30_000)]
        _added(names, calls, {10_000})
        names.pack()
        assert not names.others
        assert not any(names.pending.values())
        assert sum(len(values) for values in names.packed.values()) == 30_000
        assert names.names_of([calls[-1][0]]) == {calls[-1][0]: FUNCTIONS[29_999 % 3]}
