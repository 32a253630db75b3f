"""The pytest plugin, run as users run it: a pytest session of its own (pytester).

Each session runs in a subprocess, with the plugin loaded from the installed entry point.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

FUNCTIONS = """
import os
import sys

import pytest
import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote
def double(x):
    return 2 * x


@debuggable
@ray.remote
def broken(x):
    raise KeyError(x)


@ray.remote
def plain(x):
    return x


@debuggable
@ray.remote
class Hoarder:
    def __init__(self):
        self.kept = []

    def add(self, mib):
        self.kept.append(bytearray(mib * 2**20))
        return len(self.kept)
"""


def test_marker_option_and_strictness(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        FUNCTIONS
        + """

@pytest.mark.ray_local
def test_marked():
    assert raytrace_kit.is_local_mode()
    assert ray.get(double.remote(21)) == 42
    assert not ray.is_initialized()  # no cluster was started


def test_fixture(ray_local):
    assert ray.get(double.remote(1)) == 2


def test_unmarked():
    assert raytrace_kit.is_local_mode(), "not in local mode"


@pytest.mark.ray_local
def test_plain_call():
    plain.remote(1)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*LocalModeError*plain*"])  # names the plain function
    result.stdout.fnmatch_lines(["*not in local mode*"])
    everything = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--ray-local", "-k", "unmarked"
    )
    everything.assert_outcomes(passed=1)


def test_summary_of_the_session_calls(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        FUNCTIONS
        + """

@pytest.mark.ray_local
def test_calls():
    assert ray.get([double.remote(i) for i in range(3)]) == [0, 2, 4]
    with pytest.raises(KeyError):
        ray.get(broken.remote("k"))
"""
    )
    shown = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    shown.assert_outcomes(passed=1)
    shown.stdout.fnmatch_lines(
        [
            "*raytrace_kit: debuggable calls*",
            "4 calls, 1 failed, 0 interrupted",
            "  failed: test_summary_of_the_session_calls.broken KeyError x1",
            "  slowest: test_summary_of_the_session_calls.*",
        ]
    )
    quiet = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--no-raytrace-summary")
    quiet.assert_outcomes(passed=1)
    assert "raytrace_kit: debuggable calls" not in quiet.stdout.str()


def test_loading_the_plugin_does_not_import_ray(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
import sys

def test_no_ray():
    assert "raytrace_kit.testing" in sys.modules  # the plugin is loaded...
    assert "ray" not in sys.modules  # ...and Ray is not
"""
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_with_pytest_memray_limit_memory(pytester: pytest.Pytester) -> None:
    """ray_local with pytest-memray's limit_memory: a leaking actor method is caught."""
    pytester.makepyfile(
        FUNCTIONS
        + """

@pytest.mark.ray_local
@pytest.mark.limit_memory("24 MB")
def test_small_enough():
    hoarder = Hoarder.remote()
    assert ray.get(hoarder.add.remote(4)) == 1


@pytest.mark.ray_local
@pytest.mark.limit_memory("24 MB")
def test_leaks():
    hoarder = Hoarder.remote()
    for _ in range(10):
        ray.get(hoarder.add.remote(4))
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--memray")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_leaks*", "*Test was limited to 24.0MiB but allocated*"])
    result.stdout.fnmatch_lines(
        [  # the leaking method, where memray's report shows it
            "    - 40.0MiB allocated here:",
            "        add:*test_with_pytest_memray_limit_memory.py:*",
        ]
    )
