"""``python -m raytrace_kit``: the ``raytrace-kit`` command (see :mod:`raytrace_kit.cli`)."""

from __future__ import annotations

import sys

from raytrace_kit.cli import main

sys.exit(main())
