"""Is an answer equivalent to the reference? math-verify, in a killable, confined worker."""

from judge_service.equivalence.checker import EquivalenceChecker
from judge_service.equivalence.result import (
    EquivalencePolicy,
    EquivalenceResult,
    PercentMode,
    Verdict,
)

__all__ = [
    "EquivalenceChecker",
    "EquivalencePolicy",
    "EquivalenceResult",
    "PercentMode",
    "Verdict",
]
