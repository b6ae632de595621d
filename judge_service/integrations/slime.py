"""`judge_service.integrations.slime`, kept for its callers: a re-export of
`judge_service_client.integrations.slime`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.integrations.slime import (
    add_judge_credit,
    cp_slice,
    judge_advantages,
)

__all__ = [
    "add_judge_credit",
    "cp_slice",
    "judge_advantages",
]
