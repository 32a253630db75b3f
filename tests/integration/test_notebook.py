"""A real notebook, run by a real Jupyter kernel.

Remote code is defined in cells; the magics run; each object a user looks at shows in the
cell's output as HTML, short, with cells named as IPython names them.
"""

from __future__ import annotations

import html
from typing import Any

import nbformat
import pytest
import ray
from nbclient import NotebookClient

from tests import helpers

CELLS = [
    # 0
    "%load_ext raytrace_kit",
    # 1
    "import ray, raytrace_kit\n"
    "from raytrace_kit import debuggable\n"
    "ray.init(address='auto', log_to_driver=False)",
    # 2: remote code defined in a cell
    "@debuggable\n"
    "@ray.remote\n"
    "def allocate_blocks(n):\n"
    "    kept = [bytearray(4 * 2**20) for _ in range(n)]\n"
    "    return sum(len(b) for b in kept)\n"
    "\n"
    "@debuggable\n"
    "@ray.remote\n"
    "def spin(n):\n"
    "    return sum(i * i for i in range(n))\n"
    "\n"
    "@debuggable\n"
    "@ray.remote\n"
    "def fails(text):\n"
    "    return int(text)\n"
    "\n"
    "@debuggable\n"
    "@ray.remote\n"
    "class Tally:\n"
    "    def __init__(self):\n"
    "        self.total = 0\n"
    "    def add(self, n):\n"
    "        self.total += n\n"
    "        return (self.total, raytrace_kit.is_local_mode())\n"
    "\n"
    "allocate_blocks",
    # 3
    "%%profile_memory\nray.get(allocate_blocks.remote(4))",
    # 4
    "%%profile_cpu\nray.get([spin.remote(200_000) for _ in range(3)])",
    # 5
    "%%local_mode\ntally = Tally.remote()\nray.get(tally.add.remote(2))",
    # 6
    "raytrace_kit.echo(True)\nraytrace_kit.get_logger().info('loaded', rows=3)",
    # 7
    "try:\n    ray.get(fails.remote('x7'))\nexcept ValueError as error:\n"
    "    explained = raytrace_kit.explain(error)\nexplained",
    # 8
    "%raytrace_report",
    # 9
    "raytrace_kit.open_session()",
    # 10
    "raytrace_kit.read_events()",
    # 11: the session holds earlier tests' calls too (one Ray instance): this cell's own
    "raytrace_kit.open_session().calls(function='fails')",
    # 12: the cell's own code, profiled and named as the cell
    "%%profile_cpu --top=5\ndef heavy():\n    return sum(i * i for i in range(300_000))\nheavy()",
    # 13: an error in a magic's cell fails the cell (tagged: nbclient expects it)
    "%%local_mode\nraise ValueError('raised in the cell')",
    # 14: a class defined in a cell is the user's: its attributes are opened
    "import threading\nclass Holder:\n    def __init__(self):\n"
    "        self.lock = threading.Lock()\nraytrace_kit.check_serializable(Holder())",
    # 15
    "ray.shutdown()",
]
RAISES = {13}


def _html(cell: Any) -> list[str]:
    return [
        out["data"]["text/html"]
        for out in cell.outputs
        if out.get("output_type") in {"display_data", "execute_result"}
        and "text/html" in out.get("data", {})
    ]


def _text(cell: Any) -> str:
    parts = []
    for out in cell.outputs:
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif "text/plain" in out.get("data", {}):
            parts.append(out["data"]["text/plain"])
    return "".join(parts)


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """The notebook, executed once by a real kernel connected to the shared Ray."""
    helpers.start_shared_ray()
    # The shared instance by its address: 'auto' would take the newest cluster on the
    # machine, which may be another's.
    address = ray.get_runtime_context().gcs_address
    tmp_path = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            source.replace("address='auto'", f"address='{address}'"),
            metadata={"tags": ["raises-exception"]} if index in RAISES else {},
        )
        for index, source in enumerate(CELLS)
    ]
    client = NotebookClient(
        notebook,
        timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    return list(notebook.cells)


def test_no_cell_raised_but_the_one_meant_to(cells: list[Any]) -> None:
    for index, cell in enumerate(cells):
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        assert bool(errors) == (index in RAISES), cell.outputs


def test_objects_show_short(cells: list[Any]) -> None:

    # The debuggable function, shown short: its name and options, not a dataclass repr.
    (function,) = _html(cells[2])
    assert "debuggable function" in function
    assert "allocate_blocks" in function


def test_the_magics(cells: list[Any]) -> None:
    # %%profile_memory: the headline, then flame graphs; one is the remote call's, with the
    # allocating function in its data and the cell named as IPython names it.
    shown = _html(cells[3])
    assert "memray block" in shown[0]
    graphs = [html.unescape(g) for g in shown[1:]]
    assert graphs
    assert all(g.startswith("<iframe srcdoc=") for g in graphs)
    remote = [g for g in graphs if "allocate_blocks" in g]
    assert remote, "no flame graph holds the allocating function"
    assert any("In [" in g for g in remote)  # the cell, not /tmp/ipykernel_*/<hash>.py
    assert "ipykernel_" not in remote[0]

    # %%profile_cpu: the merged table names the cell's function.
    (stats,) = _html(cells[4])
    rows = helpers.table_rows(stats)
    assert any(row[3] == "spin" for row in rows[1:]), "\n".join(map(str, rows))
    assert not [row for row in rows[1:] if "IPython" in row[4] or "magics" in row[4]]

    # %%local_mode: the actor ran in the kernel, in local mode.
    assert "(2, True)" in _text(cells[5])

    # echo(True): the event shows in the cell's output, one readable line.
    assert "loaded  rows=3" in _text(cells[6])


def test_explain_report_session_events_and_calls(cells: list[Any]) -> None:
    # explain(): a card with the failing call's traceback line.
    (explained,) = _html(cells[7])
    assert "ValueError in a task" in explained
    trace = html.unescape(explained)
    assert "Cell In [3], line 15, in fails\n    return int(text)" in trace  # the cell's code

    # %raytrace_report, the session, the events: HTML, short.
    (made,) = _html(cells[8])  # one card: no rich output leaks into the cell
    assert "Run report" in made
    assert any("fails" in row[0] for row in helpers.table_rows(made))
    (session,) = _html(cells[9])
    assert "Session" in session
    (events,) = _html(cells[10])
    assert "Events" in events
    assert len(helpers.table_rows(events)) <= 21  # a header and at most 20 rows


def test_a_magics_cell_is_named_and_fails_as_a_cell(cells: list[Any]) -> None:
    # The cell's own function, named as the cell; no kernel or kit frames in the table.
    (own,) = _html(cells[12])
    rows = helpers.table_rows(own)[1:]
    heavy = next(row for row in rows if row[3] == "heavy")
    assert heavy[4] == f"In [{cells[12].execution_count}], line 2"
    assert not [row for row in rows if "magics.py" in row[4] or row[4].startswith("interactive")]
    assert len(rows) <= 5
    # An error inside a magic's cell fails the cell, as in any cell.
    (error,) = [o for o in cells[13].outputs if o.get("output_type") == "error"]
    assert (error["ename"], error["evalue"]) == ("ValueError", "raised in the cell")


def test_a_class_defined_in_a_cell_is_opened(cells: list[Any]) -> None:
    (verdict,) = _html(cells[14])
    culprit = helpers.table_rows(verdict)[1]
    assert culprit[0].endswith(".lock")
    assert culprit[2] == "_thread.lock"


def test_calls_show_short(cells: list[Any]) -> None:
    (calls,) = _html(cells[11])
    assert "Calls" in calls
    assert any(row[1].endswith(".fails") for row in helpers.table_rows(calls)[1:])
