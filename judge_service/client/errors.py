"""`judge_service.client.errors`, kept for its callers: a re-export of
`judge_service_client.client.errors`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

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
    error_class,
)

__all__ = [
    "APIStatusError",
    "AuthenticationError",
    "ClientRequestError",
    "ConflictError",
    "InvalidRequestError",
    "JobTimeoutError",
    "JudgeClientError",
    "JudgeDriftError",
    "NotFoundError",
    "RateLimitError",
    "RequestTooLargeError",
    "ServerError",
    "ServiceUnavailableError",
    "TransportError",
    "error_class",
]
