"""What the SDK-backed providers share: the client, its options and closing, the error table.

Both vendor SDKs (``anthropic``, ``openai``) are generated alike and fail alike: a
status error carrying the HTTP status and the server's body, a timeout that is a kind
of connection error, a connection error, and a base class for the rest. A provider
declares its SDK's classes as a table of `ErrorRow`s (`sdk_error_table` gives the rows
every such SDK needs; a provider puts rows of its own in front), and
`SDKProvider.sdk_errors` turns whatever the SDK raised into the first row that matches.
So every message names the endpoint and the model in the same words, whichever API
failed, and a new provider cannot forget a case.

The client is built on first use, not in ``__init__``: a missing key is then a
provider error of one rollout, never a crash of the service at start-up.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypedDict, TypeVar

import httpx2

from judge_service.errors import ContextLengthError, ProviderError
from judge_service.judges.llm.provider import (
    Provider,
    build_http_client,
    clip,
    is_context_length,
    root_cause,
)
from judge_service.judges.llm.ratelimit import RateLimiter

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.judges.llm.servers import WireOptions

CONTEXT_LENGTH = "context length exceeded (HTTP {f.status} from {f.where}): {f.detail}"


class SDKOptions(TypedDict, total=False):
    """The constructor options every SDK-backed provider takes (defaults in `SDKProvider`)."""

    base_url: str | None
    api_key: str | None
    max_retries: int
    request_timeout_s: float
    max_connections: int
    temperature: float | None
    tool_choice: str
    reasoning_effort: str | None


class Failure:
    """What a row's message may name about one failed request. A property is computed only
    when a row reads it: a status error's body is parsed for the rows that show it."""

    def __init__(self, exc: BaseException, provider: SDKProvider[Any], timeout_s: float) -> None:
        self.exc = exc
        self.provider = provider
        self.timeout_s = timeout_s
        self.model = provider.model
        self.kind = type(exc).__name__
        status = getattr(exc, "status_code", None)
        self.status: int | None = status if isinstance(status, int) else None
        code = getattr(exc, "code", None)
        self.code = code if isinstance(code, str) else ""

    @cached_property
    def where(self) -> str:
        return self.provider.where()

    @cached_property
    def url(self) -> str:
        return self.provider.endpoint_url()

    @cached_property
    def text(self) -> str:
        return clip(str(self.exc))

    @cached_property
    def cause(self) -> str:
        return root_cause(self.exc)

    @cached_property
    def detail(self) -> str:
        return self.provider.status_detail(self.exc)


@dataclass(frozen=True)
class ErrorRow:
    """An exception of `sdk` (with `status`, only that HTTP status; with `test`, only where
    it holds) becomes `error`, its message `message` formatted with the `Failure` as ``f``."""

    sdk: type[BaseException] | tuple[type[BaseException], ...]
    error: type[ProviderError]
    message: str
    status: int | None = None
    test: Callable[[Failure], bool] | None = None

    def matches(self, exc: BaseException, failure: Failure) -> bool:
        if not isinstance(exc, self.sdk):
            return False
        if self.status is not None and failure.status != self.status:
            return False
        return self.test is None or self.test(failure)


def sdk_error_table(
    *,
    status: type[BaseException],
    timeout: type[BaseException] | tuple[type[BaseException], ...],
    connection: type[BaseException],
    other: type[BaseException],
) -> tuple[ErrorRow, ...]:
    """The rows every such SDK needs, most specific first: its timeout error is a kind of
    connection error, and every one of its errors a kind of `other`."""
    return (
        ErrorRow(
            status,
            ContextLengthError,
            CONTEXT_LENGTH,
            test=lambda f: is_context_length(f.status or 0, f.detail),
        ),
        ErrorRow(
            status,
            ProviderError,
            "rate limited (HTTP 429 from {f.where}) after the SDK's retries: {f.detail}",
            status=429,
        ),
        ErrorRow(status, ProviderError, "HTTP {f.status} from {f.where}: {f.detail}"),
        ErrorRow(
            timeout,
            ProviderError,
            "no response from {f.where} within {f.timeout_s:.1f} s (timed out)",
        ),
        ErrorRow(
            connection, ProviderError, "cannot connect to {f.url} (model {f.model}): {f.cause}"
        ),
        ErrorRow(other, ProviderError, "{f.kind} from {f.where}: {f.text}"),
    )


class _Closable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Closable)


class SDKProvider(Provider, Generic[ClientT]):
    """A provider whose requests go through a vendor SDK. A subclass names its SDK (the
    class attributes below) and keeps only its wire format: how a request is rendered and
    sent, how the answer is read, and its own error rows."""

    sdk_name: ClassVar[str]  # for "cannot build the <name> client"
    sdk_error: ClassVar[type[Exception]]  # what the SDK's constructor raises
    http_client_class: ClassVar[type[httpx2.AsyncClient]]  # the SDK's default, hooked
    base_url_env: ClassVar[str]  # the environment variable the SDK reads its base URL from
    errors: ClassVar[tuple[ErrorRow, ...]]
    client_class: Callable[..., ClientT]

    def __init__(
        self,
        model: str,
        limiter: RateLimiter,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 2,
        request_timeout_s: float = 120.0,
        max_connections: int = 256,
        temperature: float | None = None,
        tool_choice: str = "auto",
        reasoning_effort: str | None = None,
    ) -> None:
        super().__init__(model, limiter, request_timeout_s)
        self.base_url = base_url
        self._api_key = api_key
        self.max_retries = max_retries
        self.max_connections = max_connections
        self.temperature = temperature
        self.tool_choice = tool_choice  # auto | required | a tool name
        self.reasoning_effort = reasoning_effort
        self._client: ClientT | None = None

    @classmethod
    def from_settings(
        cls, model: str, limiter: RateLimiter, settings: Settings, wire: WireOptions
    ) -> Self:
        """The provider `settings` and the resolved wire options describe."""
        return cls(
            model,
            limiter,
            base_url=cls.configured_base_url(settings),
            max_retries=settings.llm_max_retries,
            request_timeout_s=settings.llm_request_timeout_s,
            max_connections=settings.llm_max_connections,
            temperature=settings.llm_temperature,
            tool_choice=wire.tool_choice,
            reasoning_effort=wire.reasoning_effort,
            **cls.settings_options(settings, wire),
        )

    @classmethod
    @abstractmethod
    def configured_base_url(cls, settings: Settings) -> str | None:
        """The base URL the settings give this kind of provider (None: the SDK's own)."""

    @classmethod
    def settings_options(cls, settings: Settings, wire: WireOptions) -> dict[str, Any]:
        """The constructor options of this provider alone, from the settings."""
        return {}

    def endpoint_url(self) -> str:
        url = self.base_url or os.environ.get(self.base_url_env) or self.default_base_url
        return url.rstrip("/")

    def credentials(self) -> tuple[str | None, str | None]:
        """(api_key, base_url) for the SDK's constructor; None lets the SDK read its env."""
        return self._api_key, self.base_url

    def client(self) -> ClientT:
        if self._client is None:
            api_key, base_url = self.credentials()
            try:
                self._client = self.client_class(
                    api_key=api_key,
                    base_url=base_url,
                    max_retries=self.max_retries,
                    timeout=self.request_timeout_s,
                    http_client=build_http_client(
                        self.http_client_class, self.limiter, self.max_connections, self.name
                    ),
                )
            except self.sdk_error as exc:
                raise ProviderError(f"cannot build the {self.sdk_name} client: {exc}") from exc
        return self._client

    def status_detail(self, exc: BaseException) -> str:
        """The server's own message in a status error, cut to one short line."""
        return clip(str(getattr(exc, "message", None) or exc))

    def map_error(self, exc: BaseException, timeout_s: float) -> ProviderError | None:
        """`exc` as the first matching row of `errors` says; None if no row matches."""
        failure = Failure(exc, self, timeout_s)
        for row in self.errors:
            if row.matches(exc, failure):
                return row.error(row.message.format(f=failure))
        return None

    @contextmanager
    def sdk_errors(self, timeout_s: float) -> Iterator[None]:
        """Around one request: what the SDK raises leaves as the error its row names."""
        try:
            yield
        except Exception as exc:
            mapped = self.map_error(exc, timeout_s)
            if mapped is None:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
