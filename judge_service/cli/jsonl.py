"""Reading rollout files: JSON lines, each a rollout (or ``{"rollout": ...}``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge_service.jsonl import json_lines
from judge_service.schemas import Rollout


def iter_rollouts(path: Path) -> Iterator[tuple[int, Rollout | None, str | None, Any]]:
    """Yield ``(line_number, rollout, error, raw)``; a bad line is reported, not fatal."""
    for number, raw, bad_json in json_lines(path):
        if bad_json is not None:
            yield number, None, f"line {number}: not JSON: {bad_json}", None
            continue
        try:
            yield number, Rollout.model_validate(raw), None, raw
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            yield number, None, f"line {number}: {where}: {first['msg']}", raw
