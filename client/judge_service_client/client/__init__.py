"""A client of judge-service for trainers: judge rollouts, run jobs, and turn results into
padded numpy arrays. It imports httpx, numpy, pybase64 and the wire models only (no
transformers, fastapi or torch), so a trainer process pays nothing else for it.
`JudgeClient` and `AsyncJudgeClient` are two transports over one set of calls
(`calls.py`).

::

    from judge_service_client.client import JudgeClient, to_padded

    with JudgeClient("http://127.0.0.1:8000") as client:
        batch = client.judge_batch(rollouts, {"credit_encoding": "base64-f32"})
    credit = to_padded(batch.results, padding_side="left")  # (B, T) float32
"""

from judge_service_client.client.arrays import credit_array, to_padded
from judge_service_client.client.async_ import AsyncJudgeClient
from judge_service_client.client.errors import (
    APIStatusError,
    AuthenticationError,
    ClientRequestError,
    ConflictError,
    InvalidRequestError,
    JobTimeoutError,
    JudgeClientError,
    JudgeDriftError,
    NotFoundError,
    RateLimitError,
    RequestTooLargeError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
)
from judge_service_client.client.sync import JudgeClient
from judge_service_client.client.wire import DEFAULT_MAX_BATCH, RetryPolicy
from judge_service_client.schemas import (
    BatchResponse,
    GroupResponse,
    JobView,
    Options,
    Result,
    Rollout,
)

__all__ = [
    "DEFAULT_MAX_BATCH",
    "APIStatusError",
    "AsyncJudgeClient",
    "AuthenticationError",
    "BatchResponse",
    "ClientRequestError",
    "ConflictError",
    "GroupResponse",
    "InvalidRequestError",
    "JobTimeoutError",
    "JobView",
    "JudgeClient",
    "JudgeClientError",
    "JudgeDriftError",
    "NotFoundError",
    "Options",
    "RateLimitError",
    "RequestTooLargeError",
    "Result",
    "RetryPolicy",
    "Rollout",
    "ServerError",
    "ServiceUnavailableError",
    "TransportError",
    "credit_array",
    "to_padded",
]
