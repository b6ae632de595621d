"""`judge_service.client.wire`, kept for its callers: a re-export of
`judge_service_client.client.wire`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.client.wire import (
    DEFAULT_MAX_BATCH,
    FINAL_JOB_STATES,
    RETRY_STATUSES,
    OptionsLike,
    RetryPolicy,
    RolloutLike,
    as_wire,
    chunks,
    headers,
    judge_share,
    merge,
    options_body,
    raise_for_status,
    retry_after,
)

__all__ = [
    "DEFAULT_MAX_BATCH",
    "FINAL_JOB_STATES",
    "RETRY_STATUSES",
    "OptionsLike",
    "RetryPolicy",
    "RolloutLike",
    "as_wire",
    "chunks",
    "headers",
    "judge_share",
    "merge",
    "options_body",
    "raise_for_status",
    "retry_after",
]
