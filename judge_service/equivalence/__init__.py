"""Is an answer equivalent to the reference? math-verify, in a killable, confined worker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge_service.equivalence.result import (
    EquivalencePolicy,
    EquivalenceResult,
    PercentMode,
    Verdict,
)

if TYPE_CHECKING:
    from judge_service.equivalence.checker import EquivalenceChecker

__all__ = [
    "EquivalenceChecker",
    "EquivalencePolicy",
    "EquivalenceResult",
    "PercentMode",
    "Verdict",
]


def __getattr__(name: str) -> Any:
    # The checker brings in the sandbox pool and asyncio; the rules judge imports only
    # the coverage rule from this package and should not pay for them.
    if name == "EquivalenceChecker":
        from judge_service.equivalence.checker import EquivalenceChecker

        return EquivalenceChecker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
