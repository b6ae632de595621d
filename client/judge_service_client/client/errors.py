"""What the client raises, one class per way a call can fail (modelled on httpx's)::

JudgeClientError
├── TransportError              no HTTP answer: connection refused, reset, timed out
├── APIStatusError              the server answered with an error status; carries
│   │                           status_code, detail, field (the server's dotted path
│   │                           into the request body) and retry_after
│   ├── ClientRequestError      4xx: the request is wrong; never retried
│   │   ├── AuthenticationError     401, 403: missing or unknown API key
│   │   ├── NotFoundError           404: no such job or judgment (for this key)
│   │   ├── ConflictError           409: idempotency_key reused with another body
│   │   ├── RequestTooLargeError    413: a size limit (tokens, rollouts, body bytes)
│   │   └── InvalidRequestError     422: invalid input; `field` names it
│   ├── RateLimitError          429: over the key's request limit, still so after
│   │                           the retries (bounded attempts and total wait)
│   └── ServerError             5xx
│       └── ServiceUnavailableError  503: e.g. the tokenizer hub or Redis is down,
│                                    still so after the retries
├── JobTimeoutError             wait_job / iter_results: the job did not finish in time
└── JudgeDriftError             a trainer integration told to stop on a bad drift verdict
                                (`integrations.drift.DriftWatch`); carries the report
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_service_client.audit import DriftReport


class JudgeClientError(Exception):
    """Base class of every error the client raises."""


class TransportError(JudgeClientError):
    """The server could not be reached or did not answer in time (the httpx error is the
    ``__cause__``)."""


class APIStatusError(JudgeClientError):
    """The server answered with an error status."""

    def __init__(
        self,
        status_code: int,
        detail: str,
        *,
        field: str | None = None,
        retry_after: float | None = None,
        method: str = "",
        url: str = "",
    ) -> None:
        where = f" ({method} {url})" if method else ""
        named = f"{field}: " if field and not detail.startswith(field) else ""
        super().__init__(f"HTTP {status_code}{where}: {named}{detail}")
        self.status_code = status_code
        self.detail = detail
        self.field = field
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable, so it crosses processes (Ray, multiprocessing) as itself: the default
        # rebuilds from `args` alone, which holds the message, not the keyword arguments.
        return (_rebuild, (type(self), self.args, self.__dict__))


class ClientRequestError(APIStatusError):
    """4xx: the request is wrong, so sending it again cannot help."""


class AuthenticationError(ClientRequestError):
    """401 or 403."""


class NotFoundError(ClientRequestError):
    """404."""


class ConflictError(ClientRequestError):
    """409."""


class RequestTooLargeError(ClientRequestError):
    """413: a configured limit was exceeded; `field` names it."""


class InvalidRequestError(ClientRequestError):
    """422: invalid input; `field` names the offending field."""


class RateLimitError(APIStatusError):
    """429, after the client's retries."""


class ServerError(APIStatusError):
    """5xx."""


class ServiceUnavailableError(ServerError):
    """503, after the client's retries."""


class JobTimeoutError(JudgeClientError):
    """A job did not reach a final status within the caller's timeout."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    401: AuthenticationError,
    403: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    422: InvalidRequestError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def _rebuild(
    cls: type[APIStatusError], args: tuple[Any, ...], state: dict[str, Any]
) -> APIStatusError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


def error_class(status_code: int) -> type[APIStatusError]:
    """The class for an error status."""
    found = _BY_STATUS.get(status_code)
    if found is not None:
        return found
    if 400 <= status_code < 500:
        return ClientRequestError
    if status_code >= 500:
        return ServerError
    return APIStatusError


class JudgeDriftError(JudgeClientError):
    """The service's drift audit says the judge went bad, and the run was told to stop."""

    def __init__(self, report: DriftReport) -> None:
        bad = [j for j in report.judges if j.verdict == "bad"]
        reasons = "; ".join(f"{j.judge} ({j.prompt_version}): {j.reason}" for j in bad)
        super().__init__(f"the judge's drift verdict is bad: {reasons}")
        self.report = report
