"""Bounded wire types: every string, number and free-form object of a request has a size
and a shape known before any work starts (issue 10).

The limits are part of the wire format (they appear in openapi.yaml as ``maxLength`` and
friends) rather than settings: a client can check them offline, and a request either
fits everywhere or nowhere. What an operator sizes per deployment (tokens per rollout,
rollouts per batch, spans per call, body bytes) lives in the server's `Settings`.

Strings are checked for lone surrogates (``"\\ud800"`` is valid JSON, but not text):
such a string cannot be encoded as UTF-8, so it used to pass validation and fail later
with a 500, wherever the rollout was first serialised (the jobs queue, the cache).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field

MAX_ID_CHARS = 256  # rollout ids, group ids, idempotency keys
MAX_NAME_CHARS = 512  # a tokenizer: a hub id or a local directory
MAX_TEXT_CHARS = 64 * 1024  # problem, reference answer and solution, final answer, evidence
MAX_LABEL_CHARS = 64
MAX_LABELS = 64  # custom entries of options.label_scores
MAX_METADATA_CHARS = 64 * 1024  # metadata's JSON size, roughly (see `bounded_json`)
MAX_METADATA_DEPTH = 8
MAX_SPANS_CEILING = 4096  # spans per /v1/credit call whatever JUDGE_MAX_SPANS says (its le)


def well_formed(value: str) -> str:
    """`value` if it is encodable text; a lone surrogate is a ValueError naming where."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"lone surrogate at character {exc.start}: strings must be valid Unicode"
        ) from None
    return value


def bounded_json(value: dict[str, Any]) -> dict[str, Any]:
    """A free-form object within MAX_METADATA_CHARS and MAX_METADATA_DEPTH, its strings
    well formed. Walked iteratively with an early exit: a hostile object costs at most
    the budget, never the whole input (or the interpreter's recursion limit)."""
    budget = MAX_METADATA_CHARS
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_METADATA_DEPTH:
                raise ValueError(f"nested deeper than {MAX_METADATA_DEPTH} levels")
            budget -= 2
            if isinstance(node, dict):
                for key, item in node.items():
                    budget -= _scalar_size(key) + 1
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in node)
        else:
            budget -= _scalar_size(node)
        if budget < 0:
            raise ValueError(f"larger than {MAX_METADATA_CHARS} characters of JSON")
    return value


def _scalar_size(node: Any) -> int:
    if isinstance(node, str):
        well_formed(node)
        return len(node) + 2
    if isinstance(node, float) and not math.isfinite(node):
        raise ValueError("numbers must be finite (no NaN or Infinity)")
    if isinstance(node, int) and not isinstance(node, bool):
        # Not len(str(node)): that is quadratic in the digits of a huge int.
        return max(1, node.bit_length() * 3 // 10 + 1)
    return 8  # float, bool, null: a rough size is enough for a budget


# Length first (cheap: a 2 MB value stops there), then the surrogate scan.
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(well_formed)]
ShortText = Annotated[str, Field(max_length=MAX_ID_CHARS), AfterValidator(well_formed)]
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS), AfterValidator(well_formed)]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS), AfterValidator(well_formed)]
Label = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_CHARS), AfterValidator(well_formed)]
SpanLabel = Annotated[str, Field(max_length=MAX_LABEL_CHARS), AfterValidator(well_formed)]
# allow_inf_nan: Python's json (which starlette parses with) reads NaN, Infinity and
# 1e400 (as inf); none is a reward, and each would turn a whole group's advantages null.
Finite = Annotated[float, Field(allow_inf_nan=False)]
Metadata = Annotated[dict[str, Any], AfterValidator(bounded_json)]
