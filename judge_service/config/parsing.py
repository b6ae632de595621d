"""How list and per-judge settings are read from their environment strings."""

from __future__ import annotations

import json


def split_csv(value: object) -> object:
    """``"a, b,,c"`` as ``["a", "b", "c"]``; anything else as it is."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def per_judge(value: object) -> object:
    """A plain value (for every judge, key "*") or a JSON object keyed by judge spec,
    provider or "*" (the JUDGE_LLM_RATE_LIMITS keys)."""
    if value is None:
        return {}
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        return json.loads(text) if text.startswith("{") else {"*": text}
    return value
