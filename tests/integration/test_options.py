"""Tests for DebugOptions: the settings that travel with each call."""

from __future__ import annotations

import pickle

import pytest

from raytrace_kit import DebugOptions, InvalidOptionError


class TestDebugOptions:
    """Options are small, frozen, hashable, picklable and validated on change."""

    def test_defaults(self) -> None:
        """Logging is on by default."""
        assert DebugOptions().log is True

    def test_frozen_and_hashable(self) -> None:
        """Options cannot change in place and serve as cache keys."""
        options = DebugOptions()
        with pytest.raises(AttributeError):
            options.log = False  # type: ignore[misc]
        assert {DebugOptions(): 1}[DebugOptions(log=True)] == 1

    def test_pickle_round_trip(self) -> None:
        """Options travel to workers by pickle."""
        assert pickle.loads(pickle.dumps(DebugOptions(log=False))) == DebugOptions(log=False)

    def test_replace_validates(self) -> None:
        """replace() rejects unknown names and wrong types; no change returns self."""
        options = DebugOptions()
        assert options.replace() is options
        assert options.replace(log=False) == DebugOptions(log=False)
        with pytest.raises(InvalidOptionError, match="unknown raytrace_kit option 'lg'"):
            options.replace(lg=False)
        with pytest.raises(InvalidOptionError, match="expected a bool"):
            options.replace(log=1)
