"""The default label taxonomy of docs/design.md "Labels" and its scores."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

VERIFIED_CORRECTION: Final = "verified_correction"
VALID_PROGRESS: Final = "valid_progress"
USEFUL_EXPLORATION: Final = "useful_exploration"
NEUTRAL: Final = "neutral"
UNPRODUCTIVE_REPETITION: Final = "unproductive_repetition"
UNSUPPORTED: Final = "unsupported"
INVALID: Final = "invalid"

DEFAULT_LABEL_SCORES: Final = MappingProxyType(
    {
        VERIFIED_CORRECTION: 1.0,
        VALID_PROGRESS: 0.5,
        USEFUL_EXPLORATION: 0.25,
        NEUTRAL: 0.0,
        UNPRODUCTIVE_REPETITION: -0.25,
        UNSUPPORTED: -0.5,
        INVALID: -1.0,
    }
)
