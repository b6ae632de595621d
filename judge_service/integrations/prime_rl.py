"""`judge_service.integrations.prime_rl`, kept for its callers: a re-export of
`judge_service_client.integrations.prime_rl`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.integrations.prime_rl import (
    add_judge_credit,
    compact_credit,
    trace_rollout,
)

__all__ = [
    "add_judge_credit",
    "compact_credit",
    "trace_rollout",
]
