"""The JSON bytes of a response model, written by orjson instead of pydantic.

A dense 32k-token result carries two or three arrays of 32k floats; pydantic's
`model_dump_json` took ~5.8 ms to write them and orjson takes ~1.5 ms from the same
model_dump (BENCHMARKS.md "End to end (issue 16)"). The wire format is the same JSON:
the same keys in the same order, None fields left out, floats written as the shortest
repr that round-trips (pydantic and orjson both do), NaN and infinities as null (both
do). Whatever orjson refuses (an integer beyond 64 bits or a lone surrogate in an echoed
rejected span, a non-string key in a transcript) falls back to pydantic, which writes it.
"""

from __future__ import annotations

import orjson
from pydantic import BaseModel

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def dump_json(model: BaseModel) -> bytes:
    """`model.model_dump_json(exclude_none=True)`, as bytes, without per-float Python work."""
    try:
        return orjson.dumps(model.model_dump(exclude_none=True), option=_OPTIONS)
    except orjson.JSONEncodeError:
        return model.model_dump_json(exclude_none=True).encode()


def dump_json_str(model: BaseModel) -> str:
    """`dump_json` as text, for stores that keep results as strings (jobs)."""
    return dump_json(model).decode()
