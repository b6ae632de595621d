"""`judge_service.integrations.trl`, kept for its callers: a re-export of
`judge_service_client.integrations.trl`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.integrations.trl import (
    JudgeCreditGRPOTrainer,
)

__all__ = [
    "JudgeCreditGRPOTrainer",
]
