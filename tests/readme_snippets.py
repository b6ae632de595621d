"""The docs' trainer snippets, so the tests run the code the docs show.

Each trainer page under docs/trainers/ holds its snippet after a ``<!-- snippet: NAME -->``
comment; the README links to those pages.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def readme_block(name: str) -> str:
    """The python block after ``<!-- snippet: NAME ... -->`` in the docs' pages (exactly one)."""
    pattern = rf"<!-- snippet: {re.escape(name)}\b[^>]*-->\s*```python\n(.*?)```"
    found = [
        match.group(1)
        for page in sorted(DOCS.rglob("*.md"))
        for match in re.finditer(pattern, page.read_text(encoding="utf-8"), re.DOTALL)
    ]
    assert len(found) == 1, (
        f"docs/ must hold the {name} snippet once (<!-- snippet: {name} --> then a python "
        f"block); found {len(found)}"
    )
    return found[0]
