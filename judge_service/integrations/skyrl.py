"""`judge_service.integrations.skyrl`, kept for its callers: a re-export of
`judge_service_client.integrations.skyrl`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.integrations.skyrl import (
    add_judge_credit,
    add_right_aligned,
    right_aligned_rollouts,
)

__all__ = [
    "add_judge_credit",
    "add_right_aligned",
    "right_aligned_rollouts",
]
