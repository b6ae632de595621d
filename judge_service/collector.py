"""The collector held off through a bounded phase that allocates heavily (the rules judge
reading a long trace). Apart from heap.py, whose startup freeze imports the hot path: the
rules judge and validation import this, so it imports nothing of the service."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_pause_lock = threading.Lock()
_pauses = 0  # phases in progress, over all threads
_resume = False  # whether the collector was on when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection while the block runs, in any thread.

    For a bounded phase that makes tens of thousands of small acyclic objects and keeps
    them to its end (the rules judge's reading of a long trace: links, findings,
    sentences): each young collection would walk what the phase still holds, and on a
    32k-token arithmetic trace that was 10-18% of the phase. Reference counting frees
    those objects as usual; what other threads make in cycles meanwhile is collected once
    the last phase ends. Phases overlap across threads: the collector comes back on when
    the last one ends, and only if it was on when the first began."""
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
