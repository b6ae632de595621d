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
    for number, _offset, item, error in json_lines_at(path):
        yield number, item, error


def json_lines_at(path: Path) -> Iterator[tuple[int, int, Any, json.JSONDecodeError | None]]:
    """`json_lines` with each line's byte offset, for `json_line_at` to read it again."""
    offset = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            at, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                item = _unwrapped(json.loads(line.decode("utf-8")))
            except json.JSONDecodeError as exc:
                yield number, at, None, exc
                continue
            yield number, at, item, None


def json_line_at(path: Path, offset: int) -> Any:
    """The object of the line at byte `offset` (as `json_lines` gives it)."""
    with path.open("rb") as handle:
        handle.seek(offset)
        return _unwrapped(json.loads(handle.readline().decode("utf-8")))


def _unwrapped(item: Any) -> Any:
    if isinstance(item, dict) and isinstance(item.get("rollout"), dict):
        return item["rollout"]
    return item
