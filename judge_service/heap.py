"""Keeping the garbage collector's pauses short in a long-running server.

A full collection walks every tracked object, and after transformers, sympy
and the SDKs are imported that is millions of them: one pass holds the GIL
for 100–200 ms, in whatever thread triggered it, so a judge working in a
thread stalls the event loop (and `/healthz`) for that long. Objects alive
at startup live for the process, so they are moved to the permanent
generation (`gc.freeze`) once the modules of the hot path are imported, and
later collections only walk what requests create. A server does both in its
warm-up thread once it has started (api/app.py: sympy is no part of what
`/healthz` waits for), then imports transformers (and torch) there
(trace/loading.py) and freezes again once that import ends.
"""

from __future__ import annotations

import gc
import importlib

HOT_PATH_MODULES = (
    "sympy",  # the line reader's, imported on first use otherwise (lazy_sympy.py)
    "judge_service.judges.rules.rules_judge",  # the fallback judge (pipeline.Engine)
    "judge_service.trace.tokenizer",  # the tokenizer cache (transformers: the warm-up's)
    "judge_service.validate",
    "judge_service.group.batch",  # the group judge, imported by its routes on first use
)


def freeze_startup_heap() -> int:
    """Import the hot path, then freeze what is alive; returns the number of objects frozen."""
    for name in HOT_PATH_MODULES:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
