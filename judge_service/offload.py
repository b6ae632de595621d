"""Which CPU-bound steps leave the event loop, and by what measure of their size.

A step that can hold the loop for more than a few milliseconds (decoding, marking,
folding for validation, the rules judge, credit and its encoding) goes to a worker
thread, so that `/healthz` and every other request keep being served; a small one runs
on the loop, where the thread hop (queueing behind other requests' work in the pool,
and handing the GIL back and forth) costs more than the work itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

# Tokens: decoding, marking, validation and credit cost about linearly in them, a few
# milliseconds at this size.
OFFLOAD_TOKENS = 8192
# Work that follows the text (marking, folding) counts a token per this many characters
# when the text is longer than its tokens suggest: 8,192 x 16 characters fold and mark
# in a few milliseconds.
TEXT_CHARS_PER_TOKEN = 16
# Characters of trace text: the rules judge's cost follows the text (its lines, claims
# and sentences), and a few tokens may be a long text. At this size the slowest texts
# tried took 11 ms (a chain "1=1=1=...") and 7 ms (a line of claims after another);
# prose takes a fraction of a millisecond.
OFFLOAD_CHARS = 2048

R = TypeVar("R")


async def off_loop(size: int, work: Callable[[], R], *, threshold: int = OFFLOAD_TOKENS) -> R:
    """`work()` in a worker thread when `size` reaches `threshold`, else right here."""
    if size >= threshold:
        return await asyncio.to_thread(work)
    return work()
