"""``%load_ext raytrace_kit``: cell magics that profile a cell, run it in local mode, report.

- ``%%profile_memory``: memray on the cell and on the debuggable calls it submits; shows
  the peak, the top allocation sites and the flame graphs inline.
- ``%%profile_cpu``: cProfile on the cell and its debuggable calls; shows the merged table.
- ``%%local_mode``: runs the cell in local mode (``with raytrace_kit.local_mode():``).
- ``%raytrace_report``: the report of the current session (or of a source).

A cell magic runs the cell as IPython runs any cell (``shell.run_cell``): its output,
its last expression's value and its errors show as usual; what the magic adds comes after.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, cast

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display as _display

display = cast("Callable[[Any], None]", _display)

__all__ = ["RaytraceMagics", "load_ipython_extension"]

_SHOWN_FLAMEGRAPHS = 3  # the calls' own flame graphs shown inline; the rest are listed


def _options(line: str, flags: dict[str, str]) -> dict[str, Any]:
    """``--name value`` / ``--flag`` pairs of a magic's line, by ``flags``' kinds.

    Raises:
        UsageError: An unknown option, or one without its value.
    """
    from raytrace_kit.exceptions import UsageError  # noqa: PLC0415

    words, found = shlex.split(line), cast("dict[str, Any]", {})
    while words:
        word = words.pop(0)
        name = word.removeprefix("--").replace("-", "_")
        kind = flags.get(name)
        if not word.startswith("--") or kind is None:
            known = ", ".join(f"--{n.replace('_', '-')}" for n in flags)
            msg = f"unknown option {word!r}: this magic takes {known or 'no options'}"
            raise UsageError(msg)
        if kind == "flag":
            found[name] = True
        elif not words:
            msg = f"{word} needs a value"
            raise UsageError(msg)
        else:
            value = words.pop(0)
            found[name] = int(value) if kind == "int" else value
    return found


@magics_class
class RaytraceMagics(Magics):
    """The kit's magics (see the module's docstring)."""

    def _run(self, cell: str) -> None:
        if self.shell is not None:
            run = cast("Callable[..., Any]", self.shell.run_cell)  # IPython: untyped
            run(cell, store_history=False)

    @cell_magic
    def profile_memory(self, line: str, cell: str) -> None:
        """Profile the cell's memory with memray, and the debuggable calls it submits.

        Options: ``--native`` (native frames too), ``--top N`` (allocation sites listed).
        """
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"native": "flag", "top": "int"})
        memray_options: dict[str, Any] = {"native_traces": True} if options.get("native") else {}
        with raytrace_kit.profile_memory(**memray_options) as block:
            self._run(cell)
        display(_Summary(block, options.get("top", 10)))
        captures = [block.path] if block.path is not None else []
        captures += block.remote_profiles
        for capture in captures[:_SHOWN_FLAMEGRAPHS]:
            display(raytrace_kit.flamegraph(capture))
        for capture in captures[_SHOWN_FLAMEGRAPHS:]:
            print(f"more captures: raytrace_kit.flamegraph({str(capture)!r})")

    @cell_magic
    def profile_cpu(self, line: str, cell: str) -> None:
        """Profile the cell's CPU time with cProfile, and the debuggable calls it submits.

        Options: ``--top N`` (functions listed).
        """
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"top": "int"})
        with raytrace_kit.profile_cpu() as block:
            self._run(cell)
        files = [block.path] if block.path is not None else []
        files += block.remote_profiles
        if files:
            display(raytrace_kit.cpu_stats(files, top=options.get("top", 20)))

    @cell_magic
    def local_mode(self, line: str, cell: str) -> None:
        """Run the cell in local mode. Option: ``--strict`` (plain Ray calls raise)."""
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"strict": "flag"})
        with raytrace_kit.local_mode(strict=bool(options.get("strict"))):
            self._run(cell)

    @line_magic
    def raytrace_report(self, line: str) -> None:
        """Show the report of this process's session, or of ``--source``; ``--since T``."""
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"source": "str", "since": "str", "until": "str"})
        display(
            raytrace_kit.report(
                options.get("source"), since=options.get("since"), until=options.get("until")
            )
        )


class _Summary:
    """A block's headline, shown before its flame graphs."""

    def __init__(self, block: Any, top: int) -> None:
        self.block, self.top = block, top

    def _repr_html_(self) -> str:
        return str(self.block._repr_html_())

    def __repr__(self) -> str:
        return str(self.block)


def load_ipython_extension(ipython: Any) -> None:
    """What ``%load_ext raytrace_kit`` calls: register the magics."""
    ipython.register_magics(RaytraceMagics)
