"""The README's trainer snippets, so the tests run the code the README shows."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_block(name: str) -> str:
    """The python block after ``<!-- snippet: NAME ... -->`` in README.md."""
    text = README.read_text(encoding="utf-8")
    pattern = rf"<!-- snippet: {re.escape(name)}\b[^>]*-->\s*```python\n(.*?)```"
    found = re.search(pattern, text, re.DOTALL)
    assert found, (
        f"README.md lost its {name} snippet (<!-- snippet: {name} --> then a python block)"
    )
    return found.group(1)
