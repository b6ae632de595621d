"""`judge_service.integrations.verl`, kept for its callers: a re-export of
`judge_service_client.integrations.verl`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.integrations.verl import (
    CREDIT_KEY,
    ESTIMATOR,
    PENDING,
    REQUEST_KEY,
    STATUS_KEY,
    JudgeRewardManager,
    compute_judge_credit_advantage,
    decode_token_rewards,
    encode_token_rewards,
    fold_judge_credit,
    judge_groups,
    watch_drift,
)

__all__ = [
    "CREDIT_KEY",
    "ESTIMATOR",
    "PENDING",
    "REQUEST_KEY",
    "STATUS_KEY",
    "JudgeRewardManager",
    "compute_judge_credit_advantage",
    "decode_token_rewards",
    "encode_token_rewards",
    "fold_judge_credit",
    "judge_groups",
    "watch_drift",
]
