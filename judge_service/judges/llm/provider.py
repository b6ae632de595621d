"""The one small interface the tool loop drives, and what every provider shares.

A provider turns (prompt, history) into the next assistant turn. Around its
SDK call this base class: waits for the per-provider-and-model rate limiter,
bounds the call by the rollout's deadline, and lets the HTTP client observe
every response (the SDK's internal retries included) so a ``retry-after`` or
an exhausted rate-limit header pauses the limiter for everyone.

Retries are the SDK's: ``max_retries`` and ``timeout`` are set once on the
client and nothing here retries again. Two refinements keep them honest:
a 400/413 is never retried by the SDKs (and a context-length error becomes
`ContextLengthError` at once), and a server-directed wait longer than what is
left of the rollout's deadline is not slept through: the hook marks the
response ``x-should-retry: false`` and the rollout falls back immediately.

Two checks keep a third-party server honest. A limiter with ``concurrency``
holds the request until one of its slots is free (within the deadline). And
the output cap sent is checked against the usage the server reports: a
server that ignores the cap field (llama.cpp ignores max_completion_tokens)
generates until its context is full, so the first such completion is logged
with the setting to change, counted, and noted in the transcript.

Errors name the boundary, the endpoint and the model, with the server's own
message cut to `DETAIL_CHARS` (a server's 500 can carry kilobytes of dump).
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import urlsplit

import httpx2

from judge_service import metrics
from judge_service.errors import RateLimitedError
from judge_service.judges.llm.conversation import AssistantTurn, Completion, Prompt, Turn
from judge_service.judges.llm.ratelimit import PAUSE_STATUSES, RateLimiter, retry_after_seconds

log = logging.getLogger(__name__)

# The deadline (time.monotonic) of the request being sent in this task, for the response hook.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "judge_llm_deadline", default=None
)
RETRIED_STATUSES = frozenset({408, 409, 429}) | PAUSE_STATUSES
_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?(length|window)|prompt is too long|too many tokens|maximum context"
    r"|input is too long|exceeds? the (model'?s )?max",
    re.IGNORECASE,
)


# The server's own error text kept in a ProviderError.
DETAIL_CHARS = 300
# Output tokens a server may report beyond the cap sent before it counts as ignoring it
# (some count the end-of-turn token, or a template's closing tokens).
CAP_SLACK_TOKENS = 16
CAP_SLACK_SHARE = 0.02
# Providers already warned about an ignored output cap (once per name and endpoint).
_CAP_WARNED: set[tuple[str, str]] = set()


def clip(text: str, limit: int = DETAIL_CHARS) -> str:
    """`text` on one line, cut to `limit` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"


def host_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def root_cause(exc: BaseException) -> str:
    """The innermost reason of a connection failure ("Connection refused", not the SDK's
    "Connection error.")."""
    reason = str(exc)
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror) and current.strerror:
            reason = current.strerror
        elif isinstance(current, OSError) and isinstance(current.errno, int) and current.errno > 0:
            reason = os.strerror(current.errno)
        elif str(current):
            reason = str(current)
        current = current.__cause__ or current.__context__
    return clip(reason)


def is_context_length(status: int, text: str) -> bool:
    return status in (400, 413) and bool(_CONTEXT_LENGTH.search(text))


def estimate_tokens(prompt: Prompt, history: Sequence[Turn]) -> int:
    """A rough input size (4 chars a token) for the tpm bucket; settled with real usage."""
    chars = len(prompt.system) + len(prompt.context)
    chars += sum(len(t.description) + 200 for t in prompt.tools)
    for turn in history:
        if isinstance(turn, AssistantTurn):
            chars += len(turn.text) + sum(len(c.raw_arguments) + 40 for c in turn.tool_calls)
        else:
            chars += len(turn.text or "") + sum(len(o.content) + 40 for o in turn.tool_outputs)
    return chars // 4 + 1


def build_http_client(
    client_class: type[httpx2.AsyncClient],
    limiter: RateLimiter,
    max_connections: int,
    judge: str = "",
) -> httpx2.AsyncClient:
    """The SDK's own default client class (its timeouts, keep-alive), plus our hooks: the
    limiter sees every response, and the metrics count the SDK's retries and failures."""

    async def on_request(request: httpx2.Request) -> None:
        # The SDKs (Stainless) number their attempts in this header; > 0 is a retry.
        if request.headers.get("x-stainless-retry-count", "0") not in ("", "0"):
            metrics.PROVIDER_RETRIES.labels(judge).inc()

    async def on_response(response: httpx2.Response) -> None:
        status = response.status_code
        if status == 429 or status >= 500:
            metrics.PROVIDER_ERRORS.labels(judge, "429" if status == 429 else "5xx").inc()
        limiter.observe(response.status_code, response.headers)
        if response.status_code not in RETRIED_STATUSES:
            return
        wait = retry_after_seconds(response.headers)
        deadline = _DEADLINE.get()
        if wait is not None and deadline is not None and time.monotonic() + wait > deadline:
            # The SDK would sleep `wait` and retry after this rollout is already past its
            # deadline; fail now so the rollout falls back while the trainer still waits.
            response.headers["x-should-retry"] = "false"

    return client_class(
        limits=httpx2.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        event_hooks={"request": [on_request], "response": [on_response]},
    )


class Provider(ABC):
    """One model behind one API. `name` is the judge spec, e.g. ``anthropic:claude-x``."""

    kind: str
    # Where a request goes when no base URL is configured (for error messages).
    default_base_url = ""

    def __init__(self, model: str, limiter: RateLimiter, request_timeout_s: float) -> None:
        self.model = model
        self.limiter = limiter
        self.request_timeout_s = request_timeout_s

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.model}"

    def endpoint_url(self) -> str:
        """The base URL requests go to, as configured (subclasses add their SDK's env var)."""
        url = getattr(self, "base_url", None) or self.default_base_url
        return str(url).rstrip("/")

    def where(self) -> str:
        """``127.0.0.1:8080 (model smollm2)``: the endpoint host and the model, for errors."""
        return f"{host_of(self.endpoint_url())} (model {self.model})"

    def cap_hint(self) -> str:
        """What to change when the server ignores the output cap."""
        return "the server ignores the request's output cap"

    async def complete(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, deadline: float
    ) -> Completion:
        """The next assistant turn. Raises ProviderError (or a subclass) on failure."""
        estimate = estimate_tokens(prompt, history)
        async with self.limiter.slot(deadline, self.where()):
            await self.limiter.acquire(estimate + max_tokens, deadline)
            left = deadline - time.monotonic()
            if left <= 0:
                raise RateLimitedError("no time left for the request after waiting for the limiter")
            token = _DEADLINE.set(deadline)
            try:
                completion = await self._create(
                    prompt,
                    history,
                    max_tokens=max_tokens,
                    timeout_s=min(self.request_timeout_s, left),
                )
            finally:
                _DEADLINE.reset(token)
        used = completion.usage
        actual = used.input_tokens + used.cache_write_tokens + used.output_tokens
        self.limiter.settle(actual - estimate - max_tokens)
        return self._check_cap(completion, max_tokens)

    def _check_cap(self, completion: Completion, max_tokens: int) -> Completion:
        generated = completion.usage.output_tokens
        if generated <= max_tokens + max(CAP_SLACK_TOKENS, max_tokens * CAP_SLACK_SHARE):
            return completion
        metrics.PROVIDER_CAP_IGNORED.labels(self.name).inc()
        note = (
            f"{generated} output tokens where the request capped output at {max_tokens}: "
            f"{self.cap_hint()}"
        )
        key = (self.name, self.endpoint_url())
        if key not in _CAP_WARNED:
            if len(_CAP_WARNED) < 1024:  # names follow configured judges; keep it bounded
                _CAP_WARNED.add(key)
            log.warning("%s at %s: %s", self.name, host_of(self.endpoint_url()), note)
        return replace(completion, notes=(*completion.notes, note))

    @abstractmethod
    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        """Send one request through the SDK and parse the answer; map SDK errors."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the HTTP client."""
