"""Errors, one class per boundary.

Every failure that can happen while judging one rollout belongs to exactly one
boundary and is recorded once, where it crosses that boundary::

    JudgeServiceError
    ├── InputError              the request is wrong; HTTP 4xx naming `field`
    │   ├── TokenizerError      the named tokenizer cannot be loaded or is not allowed
    │   ├── TokenIdError        an id is outside the tokenizer's vocabulary
    │   └── LimitError          a configured size limit was exceeded (413)
    ├── UnavailableError        a service the server needs is down (the tokenizer hub):
    │                           HTTP 503 naming `field`, with retry-after; the request
    │                           was fine and may be sent again
    └── JudgeError              the judge could not produce spans: a result with
        │                       status "fallback" or "failed", never an exception
        ├── ProviderError       the LLM provider failed (down, 429 past budget, timeout)
        │   └── StreamCutError  a streamed reply ended without a finish reason
        ├── ToolError           a judge tool failed in a way the loop cannot absorb
        └── BudgetError         a turn, tool-call, token or deadline budget ran out

Validation never raises: a bad span is data (a rejection with a reason).
"""

from __future__ import annotations

from typing import Any


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


class JudgeError(JudgeServiceError):
    """The judge could not produce spans. `boundary` names where it failed; `partial` is
    what the session had spent before it failed (a JudgeOutcome: usage, transcript), so
    its tokens are still counted."""

    boundary = "judge"
    partial: Any = None


class ProviderError(JudgeError):
    boundary = "provider"


class StreamCutError(ProviderError):
    """A streamed reply ended without a finish reason: the server stopped mid-reply (an
    error of its own after the 200, or another request interrupting this one)."""


class ToolError(JudgeError):
    boundary = "tool"


class BudgetError(JudgeError):
    boundary = "budget"
