"""Importing the package, the CLI's report and the pytest plugin does not import Ray.

Nor OpenTelemetry's packages (the ``otel`` extra): ``import raytrace_kit`` and the command
line, export's arguments included, never load them; workers never import ``_reports``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import raytrace_kit


def test_report_and_plugin_start_without_ray(tmp_path: object) -> None:
    """Ray loads on first use of what needs it; OpenTelemetry only for an export to it."""
    code = (
        "import sys, raytrace_kit, raytrace_kit.cli, raytrace_kit.testing\n"
        "from raytrace_kit import report, open_session, Report, RaytraceKitError\n"
        f"open({str(tmp_path)!r} + '/events-abababababab-1.jsonl', 'w').close()\n"
        f"report({str(tmp_path)!r})\n"
        "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))\n"
        "raytrace_kit.cli._parser().parse_args(['export', 'otlp', '--endpoint', 'http://x'])\n"
        "assert not [m for m in sys.modules if m.startswith(('opentelemetry', 'google'))]\n"
        "from raytrace_kit import debuggable\n"
        "assert 'ray' in sys.modules  # the decorator needs Ray: it loads on first use\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_public_name_resolves_and_unknown_names_fail() -> None:
    for name in raytrace_kit.__all__:
        assert getattr(raytrace_kit, name) is not None
    assert set(raytrace_kit.__all__) <= set(dir(raytrace_kit))
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        raytrace_kit.no_such_name  # noqa: B018


def test_a_ray_data_worker_loads_only_what_runs_a_batch(tmp_path: Path) -> None:
    """A UDF instrument() covers runs its batches without the driver's proxies or readers.

    Ray Data starts a new actor for each pool, and each unpickles the UDF: what the kit
    loads there is paid again per actor (benchmarks/ray_data.py).
    """
    import copy  # noqa: PLC0415 -- the UDF: a function the child imports by name

    import ray.cloudpickle  # noqa: PLC0415 -- only this test needs Ray

    from raytrace_kit._driver import program  # noqa: PLC0415
    from raytrace_kit._options import CallSpec, DebugOptions, Program  # noqa: PLC0415
    from raytrace_kit._worker import data_udf  # noqa: PLC0415

    options = dataclasses.replace(DebugOptions(), program=Program(program.install))
    specs = data_udf.Specs("copy.copy")
    specs.call = CallSpec("copy.copy", "task", options, "MapBatches(copy)")
    payload = tmp_path / "udf.pkl"
    payload.write_bytes(ray.cloudpickle.dumps(data_udf.batch_function(copy.copy, specs)))
    code = (
        "import sys, ray, ray.data, ray.cloudpickle\n"
        f"udf = ray.cloudpickle.loads(open({str(payload)!r}, 'rb').read())\n"
        "assert udf({'id': [1, 2]}) == {'id': [1, 2]}\n"
        "heavy = ('raytrace_kit._driver.proxy', 'raytrace_kit._local', 'raytrace_kit._reports',"
        " 'cProfile', 'raytrace_kit._output.locals', 'raytrace_kit._worker.stacks')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "assert not loaded, loaded\n"
        "assert 'raytrace_kit._driver.program' in sys.modules  # the worker's hooks: in place\n"
    )
    _run_child(code, tmp_path)
    assert list((tmp_path / "logs").rglob("*.jsonl")), "the batch was recorded"


def test_a_worker_s_first_call_loads_only_what_every_call_needs(tmp_path: Path) -> None:
    """A task unpickled and run once, as each new Ray worker does, leaves the rest unloaded.

    What only some calls need comes through ``_worker/on_demand.py`` (the internals' house
    rules); each worker would pay for it otherwise (benchmarks/first_call.py).
    """
    import copy  # noqa: PLC0415 -- the task: a function the child imports by name

    import ray.cloudpickle  # noqa: PLC0415 -- only this test needs Ray

    from raytrace_kit._options import DebugOptions  # noqa: PLC0415
    from raytrace_kit._worker.instrument import instrument_function  # noqa: PLC0415

    payload = tmp_path / "task.pkl"
    payload.write_bytes(ray.cloudpickle.dumps(instrument_function(copy.copy, DebugOptions())))
    code = (
        "import sys, ray, ray.cloudpickle\n"
        f"task = ray.cloudpickle.loads(open({str(payload)!r}, 'rb').read())\n"
        "assert task([1, 2]) == [1, 2]\n"
        "on_demand = ('raytrace_kit._worker.profilers', 'raytrace_kit._worker.sampler',"
        " 'raytrace_kit._worker.loops', 'raytrace_kit._worker.capture',"
        " 'raytrace_kit._serialization', 'raytrace_kit._html', 'sysconfig', 'memray',"
        " 'cProfile')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(on_demand))\n"
        "assert not loaded, loaded\n"
        "assert 'raytrace_kit._worker.watch' in sys.modules  # the kit's thread: started\n"
    )
    _run_child(code, tmp_path)
    assert list((tmp_path / "logs").rglob("*.jsonl")), "the call was recorded"


def _run_child(code: str, tmp_path: Path) -> None:
    """``code`` in a fresh interpreter, the kit's records under ``tmp_path/logs``; it passes."""
    env = {**os.environ, "RAYTRACE_LOG_DIR": str(tmp_path / "logs")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
