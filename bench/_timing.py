"""The one timing helper the benchmarks share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of `fn` in milliseconds, over `repeats` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)
