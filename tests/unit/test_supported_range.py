"""Unit tier: the package declares exactly the Ray and Python versions its sessions test.

pip reads these bounds: an unsupported Ray or Python is refused at install time with pip's
resolver error, never installed to break at run time (docs/compatibility.md).
"""

from __future__ import annotations

import ast
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

NOXFILE = Path(__file__).parents[2] / "noxfile.py"
FULL_SUITE = ("2.60.0", "3.11")  # the `tests` session: the newest Ray, nox's own Python


def _compat_combinations() -> list[tuple[str, str]]:
    """``COMPAT`` of noxfile.py: the (Ray, Python) pairs the compat session runs."""
    for node in ast.parse(NOXFILE.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPAT":
            return [tuple(pair) for pair in ast.literal_eval(node.value)]
    raise AssertionError("noxfile.py has no COMPAT")


def _ray_requirement() -> SpecifierSet:
    for line in metadata.requires("raytrace_kit") or []:
        requirement = Requirement(line)
        if requirement.name == "ray" and requirement.marker is None:
            return requirement.specifier
    raise AssertionError("raytrace_kit does not require ray")


class TestDeclaredRange:
    """pyproject.toml's bounds are those of the tested versions, no wider."""

    def test_ray_from_the_oldest_to_the_newest_tested(self) -> None:
        """Each tested Ray is allowed; the release before the oldest and after the newest not."""
        tested = sorted({Version(ray) for ray, _ in [*_compat_combinations(), FULL_SUITE]})
        allowed = _ray_requirement()
        assert all(allowed.contains(version) for version in tested)
        oldest, newest = tested[0], tested[-1]
        assert not allowed.contains(Version(f"{oldest.major}.{oldest.minor - 1}.0"))
        assert not allowed.contains(Version(f"{newest.major}.{newest.minor + 1}.0"))

    def test_python_exactly_the_tested_minor_versions(self) -> None:
        """Of Python 3.6 to 3.16, requires-python admits exactly the tested ones."""
        allowed = SpecifierSet(metadata.metadata("raytrace_kit")["Requires-Python"])
        admitted = {f"3.{minor}" for minor in range(6, 17) if allowed.contains(f"3.{minor}.0")}
        tested = {python for _, python in [*_compat_combinations(), FULL_SUITE]}
        assert admitted == tested == {"3.10", "3.11", "3.12", "3.13"}

    def test_the_oldest_ray_and_every_python_are_in_the_compat_session(self) -> None:
        """The compat session covers what the full suite does not: Ray 2.40, other Pythons."""
        combinations = _compat_combinations()
        assert ("2.40.0", "3.11") in combinations
        assert {python for ray, python in combinations if ray == FULL_SUITE[0]} == {
            "3.10",
            "3.12",
            "3.13",
        }
