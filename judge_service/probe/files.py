"""JSONL in and out for the probe commands, and joining rollouts with judge results on ``id``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from judge_service.errors import ProbeFileError
from judge_service.jsonl import json_lines


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Objects of a JSONL file; ``{"rollout": {...}}`` lines are unwrapped. Bad lines raise."""
    for number, item, bad_json in json_lines(path):
        if bad_json is not None:
            raise ProbeFileError(f"{path}:{number}: not JSON: {bad_json}") from bad_json
        if not isinstance(item, dict):
            raise ProbeFileError(f"{path}:{number}: not a JSON object")
        yield item


def write_jsonl(path: Path, items: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
            handle.flush()
            count += 1
    return count


def join_on_id(
    rollouts: Iterable[dict[str, Any]], results: Iterable[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[str]]:
    """Pairs (rollout, result) in rollout order, and the ids found in only one file."""
    by_id = {str(r.get("id")): r for r in results}
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    unmatched: list[str] = []
    seen: set[str] = set()
    for rollout in rollouts:
        key = str(rollout.get("id"))
        seen.add(key)
        if key in by_id:
            pairs.append((rollout, by_id[key]))
        else:
            unmatched.append(key)
    unmatched.extend(k for k in by_id if k not in seen)
    return pairs, unmatched
