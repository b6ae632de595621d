"""Reading rollout files: JSON lines, each a rollout (or ``{"rollout": ...}``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge_service.schemas import Rollout


class RolloutFileError(Exception):
    pass


def iter_rollouts(path: Path) -> Iterator[tuple[int, Rollout | None, str | None, Any]]:
    """Yield ``(line_number, rollout, error, raw)``; a bad line is reported, not fatal."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, None, f"line {number}: not JSON: {exc}", None
                continue
            if isinstance(raw, dict) and "rollout" in raw and isinstance(raw["rollout"], dict):
                raw = raw["rollout"]
            try:
                yield number, Rollout.model_validate(raw), None, raw
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                yield number, None, f"line {number}: {where}: {first['msg']}", raw
