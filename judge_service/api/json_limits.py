"""How deep a JSON body nests, found on the raw bytes before anything parses it.

Python's json (which starlette and FastAPI parse with) recurses once per level: a body
of 100,000 ``[`` is a RecursionError deep in the parser, and pydantic then walks
whatever did parse recursively too. No request of this API needs more than a dozen
levels (a batch, a rollout, its metadata), so the body is refused above MAX_JSON_DEPTH.

The scan is linear and runs in C or numpy: escaped quotes are dropped first (a ``\\"``
never ends a string), then every byte but ``"[]{}`` is deleted, which leaves a short string
for any realistic body (a token-id array is one bracket pair); a bracket counts only
outside strings, which the running parity of the quotes tells.
"""

from __future__ import annotations

import numpy as np

MAX_JSON_DEPTH = 64
# Every byte value but the five that matter, for bytes.translate(None, delete=...).
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_SLICE = 1 << 20  # bytes of body per pass (bounds each GIL hold and the scan's memory)
_QUOTE, _OPENS, _CLOSES = ord('"'), (ord("["), ord("{")), (ord("]"), ord("}"))


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True if `body`, read as JSON, nests arrays and objects deeper than `limit`.
    Malformed JSON gets some answer; the parser rejects it afterwards either way.

    The body is scanned a slice at a time (each slice one short C call): on a 58 MiB
    body, one ``translate`` over the whole held the GIL, and so the event loop, for
    150 ms. A slice never ends inside a run of backslashes, so each starts unescaped."""
    if body.count(b"[") + body.count(b"{") <= limit:
        # Too few openings to nest that deep, strings or not: two C counts, where the scan
        # (numpy's fixed cost) was ~3% of a small request's time.
        return False
    depth, in_string = 0, 0
    at = 0
    while at < len(body):
        end = min(len(body), at + _SLICE)
        while end < len(body) and body[end - 1] == 0x5C:  # keep a backslash run whole
            end += 1
        depth, in_string, over = _scan(body[at:end], depth, in_string, limit)
        if over:
            return True
        at = end
    return False


def _scan(body: bytes, depth: int, in_string: int, limit: int) -> tuple[int, int, bool]:
    if b"\\" in body:
        # Pairs first: in ``\\\\"`` the quote is real, in ``\\"`` it is not. Removing
        # pairs left to right keeps each run of backslashes' parity, and runs never join.
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = body.translate(None, _NOT_STRUCTURE)
    if not marks:
        return depth, in_string, False
    view = np.frombuffer(marks, np.uint8)
    quotes = view == _QUOTE
    # 1 inside a string (an opening quote included), 0 outside (a closing one too).
    inside = (np.cumsum(quotes, dtype=np.int64) + in_string) & 1
    outside = (inside == 0) & ~quotes
    opens = (view == _OPENS[0]) | (view == _OPENS[1])
    closes = (view == _CLOSES[0]) | (view == _CLOSES[1])
    steps = (opens & outside).astype(np.int64) - (closes & outside)
    levels = np.cumsum(steps, dtype=np.int64) + depth
    return int(levels[-1]), int(inside[-1]), bool(int(levels.max()) > limit)
