"""Importing the package, the CLI's report and the pytest plugin does not import Ray.

Nor OpenTelemetry's packages (the ``otel`` extra): ``import raytrace_kit`` and the command
line, export's arguments included, never load them; workers never import ``_reports``.
"""

from __future__ import annotations

import subprocess
import sys

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
