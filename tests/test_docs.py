"""The Python code blocks of ``docs/*.md`` run as shown (each page's blocks in order, one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_docs_have_pages() -> None:
    assert PAGES, f"no pages in {DOCS}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_python_blocks_run(page: Path) -> None:
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")), 1):
        exec(compile(block, f"{page.name} block {number}", "exec"), namespace)
