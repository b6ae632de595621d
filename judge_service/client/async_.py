"""`judge_service.client.async_`, kept for its callers: a re-export of
`judge_service_client.client.async_`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.client.async_ import (
    AsyncJudgeClient,
)

__all__ = [
    "AsyncJudgeClient",
]
