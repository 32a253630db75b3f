"""A notebook, run by a Jupyter kernel: the magics, and how the kit's objects show in it.

Builds a notebook whose cells define a remote function and an actor, profile a cell's
memory and CPU (flame graphs and a table inline), run a cell in local mode, echo the log,
explain an error and show the run's report; executes it through a real kernel (nbclient,
ipykernel: pip install 'raytrace_kit[notebook]') and saves it with its outputs, to open in
Jupyter.

Run: python examples/notebook_tour.py [OUT.ipynb]   (the kernel starts its own local Ray)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

CELLS = [
    "%load_ext raytrace_kit",
    "import ray, raytrace_kit\n"
    "from raytrace_kit import debuggable\n"
    "ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False)",
    "@debuggable\n@ray.remote\ndef build_index(n):\n"
    "    blocks = [bytearray(2**20) for _ in range(n)]\n    return len(blocks)\n\n"
    "@debuggable\n@ray.remote\ndef parse(text):\n    return int(text)\n\n"
    "@debuggable\n@ray.remote\nclass Counter:\n    def __init__(self):\n        self.n = 0\n"
    "    def add(self, k):\n        self.n += k\n        return self.n\n\nbuild_index",
    "%%profile_memory\nray.get(build_index.remote(8))",
    "%%profile_cpu\nray.get([parse.remote(str(i)) for i in range(20)])",
    "%%local_mode\ncounter = Counter.remote()\nray.get(counter.add.remote(5))",
    "raytrace_kit.echo(True)\nraytrace_kit.get_logger().info('indexed', blocks=8)",
    "try:\n    ray.get(parse.remote('seven'))\nexcept ValueError as error:\n"
    "    explained = raytrace_kit.explain(error)\nexplained",
    "%raytrace_report",
    "raytrace_kit.open_session()",
    "ray.shutdown()",
]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "tour.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    nbformat.write(notebook, out)
    for number, cell in enumerate(notebook.cells, start=1):
        kinds = sorted({o.get("output_type", "") for o in cell.outputs})
        html = sum("text/html" in o.get("data", {}) for o in cell.outputs)
        first = cell.source.splitlines()[0]
        print(f"In [{number}] {first[:40]:<42} outputs: {', '.join(kinds) or '-'}; HTML: {html}")
        assert "error" not in kinds, cell.outputs
    print(f"saved with its outputs: {out}")


if __name__ == "__main__":
    main()
