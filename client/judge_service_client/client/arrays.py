"""Per-token arrays of results as numpy: one result's credit or advantage in any wire
encoding (``dense``, ``spans``, ``base64-f32``), and a batch as one padded (B, T) array.

Work is per row, never per token: base64 is decoded a row at a time and copied straight
into the output row, runs are painted as slices.

`b64decode` is the base64 decoder in use: pybase64's (SIMD; `to_padded` of a trainer's
512 x 8k batch in 19 ms instead of 114, BENCHMARKS.md) when it is installed, else the
stdlib's, with a warning logged once at import. Both are strict and refuse the same inputs;
`B64_DECODERS` holds every one available (the bench times them side by side)."""

from __future__ import annotations

import binascii
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from judge_service_client.schemas import CreditRun, Result

Field = Literal["credit", "advantage"]
PaddingSide = Literal["left", "right"]
ResultLike = Result | Mapping[str, Any]

log = logging.getLogger(__name__)


def _stdlib_b64decode(payload: str) -> bytes:
    # binascii reads an ASCII str in place; base64.b64decode would copy it to bytes and
    # scan it again with a regex to validate.
    return binascii.a2b_base64(payload, strict_mode=True)


def _available_decoders() -> dict[str, Callable[[str], bytes]]:
    found: dict[str, Callable[[str], bytes]] = {"stdlib": _stdlib_b64decode}
    try:
        import pybase64
    except ImportError:
        log.warning(
            "pybase64 is not installed: base64-f32 arrays are decoded by the stdlib, "
            "several times slower (pip install pybase64)"
        )
        return found

    def simd(payload: str) -> bytes:
        # validate=True is both the strict check and pybase64's fast (SIMD) path; without
        # it pybase64 skips non-alphabet bytes one at a time.
        return pybase64.b64decode(payload, validate=True)

    found["pybase64"] = simd
    return found


B64_DECODERS = _available_decoders()
b64decode: Callable[[str], bytes] = B64_DECODERS.get("pybase64", _stdlib_b64decode)


def _parts(result: ResultLike, field: str) -> tuple[str, str, int, Any]:
    if isinstance(result, Result):
        return result.id, result.status, result.num_tokens, getattr(result, field)
    return (
        str(result.get("id", "?")),
        str(result.get("status", "ok")),
        int(result.get("num_tokens", 0)),
        result.get(field),
    )


def _float32s(payload: str, rid: str, field: str) -> npt.NDArray[np.float32]:
    """The float32s of one base64 string, read-only, over the decoded bytes (no copy)."""
    try:
        raw = b64decode(payload)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"result {rid!r}: {field} is not valid base64: {exc}") from None
    if len(raw) % 4:
        raise ValueError(f"result {rid!r}: {field} is {len(raw)} bytes, not float32s")
    return np.frombuffer(raw, "<f4")


def _decode_into(
    out: npt.NDArray[Any], payload: Any, num_tokens: int, rid: str, field: str
) -> None:
    """Write the first len(out) values of `payload` into `out`, which is all zeros (so
    what lies beyond the payload stays 0)."""
    n = out.shape[0]
    if isinstance(payload, str):
        values = _float32s(payload, rid, field)
        k = min(n, values.shape[0])
        out[:k] = values[:k]
        return
    if not isinstance(payload, list):
        raise ValueError(f"result {rid!r}: {field} is neither a list nor a base64 string")
    if not payload:
        return
    first = payload[0]
    if isinstance(first, CreditRun | Mapping):
        for run in payload:
            start, end, value = (
                (run.start, run.end, run.value)
                if isinstance(run, CreditRun)
                else (int(run["start"]), int(run["end"]), float(run["value"]))
            )
            if not 0 <= start <= end <= num_tokens:
                raise ValueError(
                    f"result {rid!r}: {field} run [{start}, {end}) outside {num_tokens} tokens"
                )
            out[start : min(end, n)] = value
        return
    k = min(n, len(payload))
    out[:k] = _dense(payload, out.dtype, k)


def _dense(payload: list[Any], dtype: npt.DTypeLike, count: int) -> npt.NDArray[Any]:
    # fromiter reads the list's floats one by one; asarray would first scan every element
    # for nested sequences (a quarter slower on 8k floats).
    return np.fromiter(payload, dtype, count=count)


def credit_array(
    result: ResultLike, field: Field = "credit", dtype: npt.DTypeLike = np.float32
) -> npt.NDArray[Any]:
    """One result's per-token `field` (``credit`` or ``advantage``) as a 1-D array of its
    num_tokens values, whatever the encoding. Raises ValueError naming the result when it
    has no such array (a failed result; an advantage without a group)."""
    rid, status, num_tokens, payload = _parts(result, field)
    if payload is None:
        reason = "it failed" if status == "failed" else "the server did not send it"
        raise ValueError(f"result {rid!r} has no {field}: {reason}")
    if isinstance(payload, list) and payload and not isinstance(payload[0], CreditRun | Mapping):
        if len(payload) != num_tokens:
            raise ValueError(
                f"result {rid!r}: {field} has {len(payload)} values for {num_tokens} tokens"
            )
        return _dense(payload, dtype, num_tokens)
    if isinstance(payload, str):
        values = _float32s(payload, rid, field)
        if values.shape[0] != num_tokens:
            raise ValueError(
                f"result {rid!r}: {field} has {values.shape[0]} float32s for {num_tokens} tokens"
            )
        return values.astype(dtype)
    out = np.zeros(num_tokens, dtype=dtype)
    _decode_into(out, payload, num_tokens, rid, field)
    return out


def to_padded(
    results: Sequence[ResultLike],
    *,
    lengths: Sequence[int] | npt.NDArray[np.integer[Any]] | None = None,
    max_len: int | None = None,
    padding_side: PaddingSide = "right",
    field: Field = "credit",
    dtype: npt.DTypeLike = np.float32,
) -> npt.NDArray[Any]:
    """A (B, T) array of `field`, row i holding result i's first ``lengths[i]`` values
    (default: its num_tokens) against the right edge (``padding_side="left"``) or the
    left edge (``"right"``), zeros elsewhere. A length beyond num_tokens (an EOS the
    trainer appended) reads as zeros; a shorter one keeps the first values. T is
    `max_len` (default: the longest row); a row longer than `max_len` is an error, not
    a silent cut. A failed result is a row of zeros (the server gave it no credit)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    parts = [_parts(r, field) for r in results]
    if lengths is None:
        sizes = [num_tokens for _, _, num_tokens, _ in parts]
    else:
        sizes = [int(n) for n in lengths]
        if len(sizes) != len(parts):
            raise ValueError(f"{len(sizes)} lengths for {len(parts)} results")
        if any(n < 0 for n in sizes):
            raise ValueError("lengths must be >= 0")
    width = max(sizes, default=0) if max_len is None else max_len
    out = np.zeros((len(parts), width), dtype=dtype)
    for i, ((rid, status, num_tokens, payload), size) in enumerate(zip(parts, sizes, strict=True)):
        if size > width:
            raise ValueError(
                f"result {rid!r} (row {i}) has {size} tokens, more than max_len {width}"
            )
        if payload is None:
            if status == "failed":
                continue
            raise ValueError(f"result {rid!r} (row {i}) has no {field}: the server did not send it")
        row = out[i, :size] if padding_side == "right" else out[i, width - size :]
        _decode_into(row, payload, num_tokens, rid, field)
    return out
