"""`judge_service.integrations.openrlhf`, kept for its callers: a re-export of
`judge_service_client.integrations.openrlhf`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.integrations.openrlhf import (
    Span,
    action_rollouts,
    add_credit,
    install,
    judge_experiences,
    with_judge_credit,
)

__all__ = [
    "Span",
    "action_rollouts",
    "add_credit",
    "install",
    "judge_experiences",
    "with_judge_credit",
]
