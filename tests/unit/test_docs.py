"""Every docs page with code names a runnable script in examples/ (run by `nox -s examples`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_a_page_with_code_names_an_example_that_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    if "```python" not in text:
        return
    named = set(re.findall(r"examples/(\w+\.py)", text))
    assert named, f"{page.name} has code but names no script in examples/"
    missing = [name for name in named if not (ROOT / "examples" / name).is_file()]
    assert not missing, f"{page.name} names scripts that do not exist: {missing}"
