"""The work folder's ``_site/sitecustomize.py``: ``ray.tests`` and ``ray.data.tests`` importable.

data_compare.py copies this file into the work folder and puts ``_site`` on ``PYTHONPATH``,
so that every Python process of a run loads it at start: the pytest process and each Ray
worker it starts (they inherit the environment). Ray's wheel ships neither test package;
the fetched test files import both (``from ray.data.tests.util import ...``), and a worker
that unpickles a UDF imports the module that defined it. This finder maps the two package
names to folders of the work folder (``RAY_DATA_TESTS_DIR``); it imports nothing itself,
and does nothing in a process without that variable.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_ROOT = os.environ.get("RAY_DATA_TESTS_DIR", "")
_PACKAGES = {"ray.tests": "_ray_tests", "ray.data.tests": "_ray_data_tests"}


class _TestPackages(importlib.abc.MetaPathFinder):
    """Finds ``ray.tests`` and ``ray.data.tests`` in the work folder; nothing else."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        folder = _PACKAGES.get(fullname)
        if folder is None:
            return None
        location = os.path.join(_ROOT, folder)
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(location, "__init__.py"), submodule_search_locations=[location]
        )


if _ROOT:
    sys.meta_path.insert(0, _TestPackages())
