"""`judge_service.labels`, kept for its callers: a re-export of
`judge_service_client.labels`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.labels import (
    DEFAULT_LABEL_SCORES,
    INVALID,
    NEUTRAL,
    UNPRODUCTIVE_REPETITION,
    UNSUPPORTED,
    USEFUL_EXPLORATION,
    VALID_PROGRESS,
    VERIFIED_CORRECTION,
)

__all__ = [
    "DEFAULT_LABEL_SCORES",
    "INVALID",
    "NEUTRAL",
    "UNPRODUCTIVE_REPETITION",
    "UNSUPPORTED",
    "USEFUL_EXPLORATION",
    "VALID_PROGRESS",
    "VERIFIED_CORRECTION",
]
