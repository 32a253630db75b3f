"""pdb in local mode: breakpoints and post-mortem, in a script driven through stdin."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def _run_script(code: str, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAYTRACE_LOCAL_MODE"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONBREAKPOINT": "pdb.set_trace"},
        check=False,
    )


class TestDebuggers:
    """pdb works on local calls: breakpoints and post-mortem, driven through stdin."""

    def test_breakpoint_stops_and_continue_gives_the_result(self) -> None:
        """breakpoint() inside a remote function stops; 'p' sees locals; 'c' continues."""
        result = _run_script(
            """
            import ray
            from raytrace_kit import debuggable, local_mode

            @debuggable
            @ray.remote
            def calculate_statistics(values):
                total = sum(values)
                breakpoint()
                return total / len(values)

            with local_mode():
                print("RESULT", ray.get(calculate_statistics.remote([1, 2, 3, 6])))
            print("INITIALIZED", ray.is_initialized())
            """,
            stdin="p total\nc\n",
        )
        assert result.returncode == 0, result.stderr
        assert "(Pdb)" in result.stdout
        assert "\n12\n" in result.stdout.replace("(Pdb) ", "\n")
        assert "RESULT 3.0" in result.stdout
        assert "INITIALIZED False" in result.stdout

    @pytest.mark.parametrize("where_set", ["decorator", "block"])
    def test_post_mortem_opens_at_the_failing_frame(self, where_set: str) -> None:
        """post_mortem=True opens pdb where the exception was raised."""
        decorator = "@debuggable(post_mortem=True)" if where_set == "decorator" else "@debuggable"
        block = "local_mode()" if where_set == "decorator" else "local_mode(post_mortem=True)"
        result = _run_script(
            f"""
            import ray
            from raytrace_kit import debuggable, local_mode

            {decorator}
            @ray.remote
            def divide(a, b):
                ratio_inputs = (a, b)
                return a / b

            with {block}:
                ref = divide.remote(1, 0)
            try:
                ray.get(ref)
            except ZeroDivisionError:
                print("RAISED AT GET")
            """,
            stdin="p ratio_inputs\nq\n",
        )
        assert result.returncode == 0, result.stderr
        assert "(1, 0)" in result.stdout
        assert "RAISED AT GET" in result.stdout
