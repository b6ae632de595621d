"""Every error this package raises on purpose, one class per boundary.

Every failure that can happen while judging one rollout belongs to exactly one
boundary and is recorded once, where it crosses that boundary::

    JudgeServiceError
    ├── InputError              the request is wrong; HTTP 4xx naming `field`
    │   ├── TokenizerError      the named tokenizer cannot be loaded or is not allowed
    │   ├── TokenIdError        an id is outside the tokenizer's vocabulary
    │   ├── LimitError          a configured size limit was exceeded (413)
    │   ├── NotFoundError       no such job (404)
    │   └── ConflictError       the job is not in a state that allows this (409)
    ├── UnavailableError        a service the server needs is down (the tokenizer hub):
    │                           HTTP 503 naming `field`, with retry-after; the request
    │                           was fine and may be sent again
    ├── StoreUnavailable        the store (Redis) cannot be reached: 503, callers degrade
    ├── RedisUrlError           (also a ValueError) JUDGE_REDIS_URL cannot be connected
    │                           with: a settings error at startup, naming the part
    ├── AuthError               no or a wrong API key (401)
    ├── TooManyRequests         the key's request budget is spent (429, retry-after)
    ├── IdempotencyConflict     an idempotency key reused for a different request (409)
    ├── JudgeError              the judge could not produce spans: a result with
    │   │                       status "fallback" or "failed", never an HTTP error;
    │   │                       `partial` is what the session had spent
    │   ├── ProviderError       the LLM provider failed (down, 429 past budget, timeout)
    │   │   ├── StreamCutError      a streamed reply ended without a finish reason
    │   │   ├── ContextLengthError  the request no longer fits the context window
    │   │   ├── RateLimitedError    the rate limit leaves no room before the deadline
    │   │   └── SlotTimeoutError    every request slot stayed busy until the deadline
    │   ├── BudgetError         a turn, tool-call, token or deadline budget ran out
    │   └── ValueJudgeError     a model-internal judge (value:<model>) failed
    ├── RemoteScorerError       a vLLM scorer (vllm:<model>@<url>) failed or answered wrong
    ├── InputFileError          a file given to a command has bad lines, each named
    │   ├── ProbeFileError      the probe's and audit's JSONL
    │   └── RecordsError        an eval set (eval), every bad line listed
    └── ParseError              (also a ValueError) text the rules judge's exact
        └── TooLarge            arithmetic does not check: "not checkable", never a
                                verdict; TooLarge when a size bound stops it first

Validation never raises: a bad span is data (a rejection with a reason). A judge
tool's failure is a tool message the judge reads, never an exception. Two other
trees are drawn the same way: `sandbox.errors` (the Python sandbox, a package of
its own) and `judge_service.client.errors` (the trainers' client, importable
without the server's dependencies).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self


class JudgeServiceError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(JudgeServiceError):
    """The request is wrong. `field` is a dotted path into the request body."""

    status_code = 422

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def with_prefix(self, prefix: str) -> InputError:
        """The same error, its field placed under `prefix` (e.g. ``rollout``)."""
        clone = type(self)(self.message, field=f"{prefix}.{self.field}" if prefix else self.field)
        return clone


class TokenizerError(InputError):
    """The rollout's tokenizer cannot be loaded."""


class TokenIdError(InputError):
    """A response token id is outside the tokenizer's vocabulary."""


class LimitError(InputError):
    """A configured size limit (tokens per rollout, rollouts per batch) was exceeded."""

    status_code = 413


class NotFoundError(InputError):
    """No such job (404)."""

    status_code = 404


class ConflictError(InputError):
    """The job is not in a state that allows this (409)."""

    status_code = 409


class UnavailableError(JudgeServiceError):
    """A service this server depends on is unreachable (the tokenizer hub): not the
    caller's fault, so a 503 with ``retry-after`` rather than a 4xx. `field` names the
    part of the request that needed it; `retry_after_s` is when to try again."""

    status_code = 503

    def __init__(self, message: str, *, field: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s

    def with_prefix(self, prefix: str) -> UnavailableError:
        """The same error, its field placed under `prefix` (e.g. ``rollout``)."""
        field = f"{prefix}.{self.field}" if prefix else self.field
        return type(self)(self.message, field=field, retry_after_s=self.retry_after_s)


class StoreUnavailable(JudgeServiceError):
    """The store cannot be reached (Redis down or restarting); callers degrade or retry."""


class RedisUrlError(JudgeServiceError, ValueError):
    """JUDGE_REDIS_URL is not a URL this service can connect with (says which part). A
    ValueError, so that the settings report it as the field's validation error."""


class AuthError(JudgeServiceError):
    """No API key, or one the server does not know (401)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TooManyRequests(JudgeServiceError):
    """The caller's requests-per-minute budget is spent (429 with retry-after)."""

    def __init__(self, retry_after_s: float, rpm: float) -> None:
        super().__init__(retry_after_s)
        self.retry_after_s = retry_after_s
        self.rpm = rpm


class IdempotencyConflict(JudgeServiceError):
    """The idempotency key names a job created from a different request body."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


class JudgeError(JudgeServiceError):
    """The judge could not produce spans. `boundary` names where it failed; `partial` is
    what the session had spent before it failed (a JudgeOutcome: usage, transcript), so
    its tokens are still counted."""

    boundary = "judge"

    def __init__(self, message: str = "", *, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial

    def with_partial(self, partial: Any) -> Self:
        """This error (its class and message) carrying `partial`: a session adds what it
        spent as the error leaves it, without changing the error it caught."""
        return type(self)(str(self), partial=partial)


class ProviderError(JudgeError):
    boundary = "provider"


class StreamCutError(ProviderError):
    """A streamed reply ended without a finish reason: the server stopped mid-reply (an
    error of its own after the 200, or another request interrupting this one)."""


class ContextLengthError(ProviderError):
    """The request no longer fits the model's context window; never retried."""


class RateLimitedError(ProviderError):
    """The provider's rate limit leaves no room before the rollout's deadline."""


class SlotTimeoutError(ProviderError):
    """Every request slot of the provider stayed busy until the rollout's deadline."""


class BudgetError(JudgeError):
    boundary = "budget"


class ValueJudgeError(JudgeError):
    boundary = "value"


class RemoteScorerError(JudgeServiceError):
    """A remote scorer (vLLM's completions with prompt logprobs) failed or answered with
    something other than one logprob per token."""


class InputFileError(JudgeServiceError):
    """A file given to a command has bad lines; the message names each."""


class ProbeFileError(InputFileError):
    pass


class RecordsError(InputFileError):
    """Bad lines in an eval file: every one of them, each naming its line and field."""

    MAX_SHOWN = 20

    def __init__(self, errors: Sequence[str]) -> None:
        shown = list(errors[: self.MAX_SHOWN])
        if len(errors) > len(shown):
            shown.append(f"... and {len(errors) - len(shown)} more")
        super().__init__("\n".join(shown))
        self.errors = list(errors)


class ParseError(JudgeServiceError, ValueError):
    """The text is not a purely numeric expression the rules judge's grammar accepts."""


class TooLarge(ParseError):
    """The expression is numeric but too large or too deep to evaluate safely."""
