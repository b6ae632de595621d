"""JSON lines: the one reader behind the commands' rollout and result files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def json_lines(path: Path) -> Iterator[tuple[int, Any, json.JSONDecodeError | None]]:
    """``(line number, object, None)`` per non-blank line, a ``{"rollout": {...}}`` line
    unwrapped; ``(line number, None, error)`` for a line that is not JSON. What a bad line
    means (skipped and reported, or fatal) is the caller's."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, None, exc
                continue
            if isinstance(item, dict) and isinstance(item.get("rollout"), dict):
                item = item["rollout"]
            yield number, item, None
