"""Parsing and validating a large JSON body without holding the GIL for long.

Moving ``json.loads`` to a thread is not enough: it is one C call, and it holds the
GIL (and so the event loop) until the whole document is built: 1.4 s for a 56 MiB
batch of token ids. So is pydantic's validation of the whole body (0.4 s). Here:

* **Parsing** goes through ijson's C backend (yajl), which builds the same document
  from 64 KiB chunks that it reads by calling a Python method (`_Chunks.read`); the
  interpreter can hand the GIL to the event loop at each call, so no single hold is
  longer than one chunk's parse (~1 ms).
* **Validation** goes item by item for the body's lists of models (a batch's
  rollouts), then once over the whole with those items already models; pydantic
  returns a model instance of the expected class as it is, so that last pass costs
  what the small fields cost.

Where yajl and ``json`` differ, the answer is still a 422 naming ``body``:
``NaN``, ``Infinity`` and integers beyond 64 bits are JSON decode errors here (``json``
accepts them and pydantic then names the field), and a lone surrogate escape, which
yajl would silently turn into ``?``, is found first and refused.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

import ijson
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter, ValidationError

CHUNK_BYTES = 64 * 1024
_HIGH, _LOW = range(0xD800, 0xDC00), range(0xDC00, 0xE000)


class _Chunks:
    """The body as a file whose ``read`` is Python code (see the module docstring)."""

    def __init__(self, body: bytes) -> None:
        self._view = memoryview(body)
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        size = CHUNK_BYTES if size < 0 else min(size, CHUNK_BYTES)
        chunk = self._view[self._at : self._at + size]
        self._at += len(chunk)
        return bytes(chunk)


def _decode_error(message: str, position: int) -> RequestValidationError:
    # The shape FastAPI gives a body that ``json.loads`` refuses.
    return RequestValidationError(
        [
            {
                "type": "json_invalid",
                "loc": ("body", position),
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": message},
            }
        ]
    )


def _escape_at(body: bytes, at: int) -> int | None:
    """The code unit of the ``\\uXXXX`` escape at `at`, or None if it is not one."""
    digits = body[at + 2 : at + 6]
    if len(digits) != 4:
        return None
    try:
        return int(digits, 16)
    except ValueError:
        return None


def lone_surrogate(body: bytes) -> int | None:
    """The byte offset of the first ``\\uD800``-``\\uDFFF`` escape that is not half of a
    pair, or None. An escape counts only after an even run of backslashes (``\\\\u`` is
    an escaped backslash and a letter)."""
    at = body.find(b"\\u")
    while at >= 0:
        run = 0
        while at - run - 1 >= 0 and body[at - run - 1] == 0x5C:
            run += 1
        unit = _escape_at(body, at) if run % 2 == 0 else None
        step = 2
        if unit is not None and unit in _HIGH:
            after = at + 6
            follow = _escape_at(body, after) if body[after : after + 2] == b"\\u" else None
            if follow is None or follow not in _LOW:
                return at
            step = 12  # the pair
        elif unit is not None and unit in _LOW:
            return at
        at = body.find(b"\\u", at + step)
    return None


def parse(body: bytes) -> object:
    """`body` as JSON, built chunk by chunk; RequestValidationError if it is not JSON."""
    surrogate = lone_surrogate(body)
    if surrogate is not None:
        return _raise(_decode_error("a lone surrogate escape (not UTF-16 text)", surrogate))
    reader = _Chunks(body)
    try:
        documents = ijson.items(reader, "", use_float=True, buf_size=CHUNK_BYTES)
        value = next(documents)
        # Anything after the first value but whitespace is an error, as for json.loads.
        for _extra in documents:
            return _raise(_decode_error("extra data after the JSON value", reader._at))
    except StopIteration:
        return _raise(_decode_error("no JSON value", 0))
    except (ijson.JSONError, UnicodeDecodeError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid JSON"
        return _raise(_decode_error(first_line, reader._at))
    return value


def _raise(error: RequestValidationError) -> object:
    raise error


@functools.cache
def _adapter(model: type[BaseModel]) -> TypeAdapter[Any]:
    return TypeAdapter(model)


def _item_model(annotation: object) -> type[BaseModel] | None:
    """M for a field annotated ``list[M]`` with M a model; else None."""
    if typing.get_origin(annotation) is not list:
        return None
    (item,) = typing.get_args(annotation) or (None,)
    return item if isinstance(item, type) and issubclass(item, BaseModel) else None


def validate_lists_by_item(model: object, data: object) -> object:
    """`data` with each item of `model`'s list-of-model fields validated on its own (an
    invalid item is left as it was, for the whole-body validation to report in order)."""
    if not (isinstance(model, type) and issubclass(model, BaseModel) and isinstance(data, dict)):
        return data
    out = dict(data)
    for name, info in model.model_fields.items():
        key = info.alias or name
        items = out.get(key)
        item_model = _item_model(info.annotation)
        if item_model is None or not isinstance(items, list):
            continue
        adapter = _adapter(item_model)
        validated: list[object] = []
        for item in items:
            try:
                validated.append(adapter.validate_python(item))
            except ValidationError:
                validated.append(item)
        out[key] = validated
    return out
