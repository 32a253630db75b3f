"""``%load_ext raytrace_kit``: cell magics that profile a cell, run it in local mode, report.

- ``%%profile_memory``: memray on the cell and on the debuggable calls it submits; shows
  the peak, the top allocation sites and the flame graphs inline.
- ``%%profile_cpu``: cProfile on the cell and its debuggable calls; shows the merged table.
- ``%%local_mode``: runs the cell in local mode (``with raytrace_kit.local_mode():``).
- ``%raytrace_report``: the report of the current session (or of a source).

A cell magic runs the cell's code in the notebook's namespace, as ``%%time`` does: its
output shows as usual, its last expression's value becomes the cell's result, and an
error fails the cell (so "Run All" stops there). The code is named as the cell itself,
``In [n]``, in tracebacks and profiles.
"""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable
from typing import Any, cast

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display as _display

display = cast("Callable[[Any], None]", _display)

__all__ = ["RaytraceMagics", "load_ipython_extension"]

_SHOWN_FLAMEGRAPHS = 2  # flame graphs shown inline (about 5 MB each); the rest are listed
# Frames of the kernel, the kit, the import system and Ray's insides: not what a cell's
# profile is about (Ray's API calls, ray.get and the like, stay: waiting is worth seeing).
_NOT_THE_CELL = ("/IPython/", "/ipykernel/", "/raytrace_kit/", "importlib", "/ray/")
_RAY_API = frozenset({"get", "wait", "put", "remote"})


def _options(line: str, flags: dict[str, str]) -> dict[str, Any]:
    """``--name value`` / ``--flag`` pairs of a magic's line, by ``flags``' kinds.

    Raises:
        UsageError: An unknown option, or one without its value.
    """
    from raytrace_kit.exceptions import UsageError  # noqa: PLC0415

    words, found = shlex.split(line), cast("dict[str, Any]", {})
    while words:
        word = words.pop(0)
        if word.startswith("--") and "=" in word:  # --top=3
            word, value = word.split("=", 1)
            words.insert(0, value)
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
            if kind == "int" and not value.isdigit():
                msg = f"{word} takes a whole number, not {value!r}"
                raise UsageError(msg)
            found[name] = int(value) if kind == "int" else value
    return found


@magics_class
class RaytraceMagics(Magics):
    """The kit's magics (see the module's docstring)."""

    def _run(self, cell: str) -> Any:
        """Run the cell's code here; return its last expression's value; let errors out."""
        shell: Any = self.shell
        if shell is None:
            return None
        # %magics and !commands inside the cell; a first line for the magic's own, so that
        # line numbers are the cell's as the user sees it.
        code = "\n" + shell.transform_cell(cell)
        # This cell's number: the one IPython gave the cell that holds the magic (cached last).
        numbers = list(getattr(shell.compile, "_filename_map", {}).values())
        filename = shell.compile.cache(code, numbers[-1] if numbers else shell.execution_count)
        tree = ast.parse(code, filename)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        namespace = shell.user_ns
        exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 -- the user's own cell
        if last is None:
            return None
        return eval(compile(last, filename, "eval"), namespace)  # noqa: S307 -- as above

    @cell_magic
    def profile_memory(self, line: str, cell: str) -> Any:
        """Profile the cell's memory with memray, and the debuggable calls it submits.

        Options: ``--native`` (native frames too), ``--top N`` (allocation sites listed).
        """
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"native": "flag", "top": "int"})
        memray_options: dict[str, Any] = {"native_traces": True} if options.get("native") else {}
        try:
            with raytrace_kit.profile_memory(**memray_options) as block:
                value = self._run(cell)
        finally:
            display(_Summary(block, options.get("top", 10)))
            captures = [*block.remote_profiles, *([block.path] if block.path else [])]
            for capture in captures[:_SHOWN_FLAMEGRAPHS]:  # the calls' first: the work
                display(raytrace_kit.flamegraph(capture))
            for capture in captures[_SHOWN_FLAMEGRAPHS:]:
                print(f"more captures: raytrace_kit.flamegraph({str(capture)!r})")
        return value

    @cell_magic
    def profile_cpu(self, line: str, cell: str) -> Any:
        """Profile the cell's CPU time with cProfile, and the debuggable calls it submits.

        Options: ``--top N`` (functions listed).
        """
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"top": "int"})
        try:
            with raytrace_kit.profile_cpu() as block:
                value = self._run(cell)
        finally:
            files = [block.path] if block.path is not None else []
            files += block.remote_profiles
            if files:
                stats = raytrace_kit.cpu_stats(files, top=options.get("top", 20))
                display(_CellStats(stats, options.get("top", 20)))
        return value

    @cell_magic
    def local_mode(self, line: str, cell: str) -> Any:
        """Run the cell in local mode. Option: ``--strict`` (plain Ray calls raise)."""
        import raytrace_kit  # noqa: PLC0415

        options = _options(line, {"strict": "flag"})
        with raytrace_kit.local_mode(strict=bool(options.get("strict"))):
            return self._run(cell)

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
    """A block's headline, shown before its flame graphs: ``top`` allocation sites."""

    def __init__(self, block: Any, top: int) -> None:
        self.block, self.top = block, top

    def _repr_html_(self) -> str:
        from raytrace_kit import profile_summary  # noqa: PLC0415

        parts = [str(self.block.html_card(self.top))]
        for path in self.block.remote_profiles[:_SHOWN_FLAMEGRAPHS]:  # the calls' own peaks
            try:
                parts.append(profile_summary(path, top=self.top)._repr_html_())
            except Exception:  # noqa: S112 -- a capture still being written: skip it
                continue
        return "".join(parts)

    def __repr__(self) -> str:
        return str(self.block)


def _of_the_cell(row: dict[str, Any]) -> bool:
    file, function = str(row["file"]), str(row["function"])
    if function.startswith("<built-in method builtins.e"):  # exec, eval: the magic's own
        return False
    if "/ray/" in file and function in _RAY_API:
        return True
    return not any(part in file for part in _NOT_THE_CELL)


class _CellStats:
    """CPU stats of a cell and its calls, without the kernel's, the kit's and imports' frames."""

    def __init__(self, stats: Any, top: int) -> None:
        self.rows = [row for row in stats.rows(top=top + 400) if _of_the_cell(row)][:top]
        self.files = len(stats.files)

    def _repr_html_(self) -> str:
        from raytrace_kit._html import card, table, where  # noqa: PLC0415

        rows = [
            (r["calls"], f"{r['total_s']:.4f}", f"{r['cumulative_s']:.4f}", r["function"],
             where(r["file"], r["line"]))
            for r in self.rows
        ]  # fmt: skip
        summary = f"the cell and its calls, merged from {self.files} file(s)"
        return card(
            "cProfile stats", summary, table(("calls", "own s", "cum s", "function", "where"), rows)
        )

    def __repr__(self) -> str:
        return "\n".join(f"{r['cumulative_s']:9.4f}s cum  {r['function']}" for r in self.rows)


def load_ipython_extension(ipython: Any) -> None:
    """What ``%load_ext raytrace_kit`` calls: register the magics."""
    ipython.register_magics(RaytraceMagics)
