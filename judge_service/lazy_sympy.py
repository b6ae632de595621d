"""sympy, imported when a claim first needs it rather than when the server starts.

sympy takes ~0.45 s to import, and the line reader (`judges.rules`' claims, arithmetic,
algebra, units, exact) sits under grounding, validation and the pipeline, so a plain
``import sympy`` there put it on every server's start path: `/healthz` waited for it
(issue 39). Those modules write ``from judge_service.lazy_sympy import sympy`` and use
``sympy.X`` as before; the first attribute read imports sympy, and each name read is
then kept on this object, so later reads cost what a module attribute costs.

The server's warm-up thread imports sympy right after start (`api/app.py`); a claim
read while that import runs waits for it (Python's import lock), it never sees half a
module. For type checkers this *is* the sympy module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["load", "sympy"]


class _LazySympy:
    """Stands for the sympy module until its first attribute read, then mirrors it."""

    def __getattr__(self, name: str) -> Any:  # only for names not yet kept
        value = getattr(load(), name)
        setattr(self, name, value)  # the same object from any thread: a race is harmless
        return value


def load() -> Any:
    """Import sympy (or wait for the thread importing it) and return the module."""
    return importlib.import_module("sympy")


if TYPE_CHECKING:
    import sympy as sympy
else:
    sympy = _LazySympy()
