"""`anthropic:<model>`: the Messages API with tool use, through the `anthropic` SDK.

Request layout (prefix order is tools → system → messages)::

    tools     sorted by name, canonical JSON schemas
    system    [instructions + rubric]                       ← breakpoint 1 (shared by rollouts)
    messages  [user: rollout context with the marked trace] ← breakpoint 2 (this rollout)
              [assistant: text + tool_use] [user: tool_result ...] ...
              last block of the previous turn's user message ← breakpoint 3 (rolling, read)
              last block of the last message                 ← breakpoint 4 (rolling, written)

Four ``cache_control`` breakpoints, the API's maximum. Breakpoint 4 of one
request is breakpoint 3 of the next, so turn k reads everything before turn
k - 1's results from the cache without relying on the API's look-back, and
writes only what turn k - 1 added. Usage is read from ``input_tokens``
(uncached), ``cache_creation_input_tokens`` and ``cache_read_input_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import anthropic

from judge_service.errors import ProviderError
from judge_service.judges.base import Usage
from judge_service.judges.llm.conversation import (
    AssistantTurn,
    Completion,
    Prompt,
    ToolCall,
    Turn,
)
from judge_service.judges.llm.provider import (
    ContextLengthError,
    Provider,
    build_http_client,
    is_context_length,
)
from judge_service.judges.llm.ratelimit import RateLimiter


def parse_arguments(value: object) -> tuple[dict[str, Any], str, str | None]:
    """(arguments, raw text, error) from a tool call's input as the API returned it."""
    if isinstance(value, dict):
        return value, json.dumps(value, ensure_ascii=False), None
    raw = value if isinstance(value, str) else json.dumps(value)
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError) as exc:
        return {}, raw, f"the arguments are not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return {}, raw, "the arguments must be a JSON object"
    return parsed, raw, None


class AnthropicProvider(Provider):
    kind = "anthropic"

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
        cache_ttl: Literal["5m", "1h"] = "5m",
        temperature: float | None = None,
    ) -> None:
        super().__init__(model, limiter, request_timeout_s)
        self.base_url = base_url
        self._api_key = api_key
        self.max_retries = max_retries
        self.max_connections = max_connections
        self.cache_control: dict[str, str] = {"type": "ephemeral", "ttl": cache_ttl}
        self.temperature = temperature
        self._client: anthropic.AsyncAnthropic | None = None

    def client(self) -> anthropic.AsyncAnthropic:
        """Built on first use: a missing key is a provider error of one rollout, not a crash."""
        if self._client is None:
            try:
                self._client = anthropic.AsyncAnthropic(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    max_retries=self.max_retries,
                    timeout=self.request_timeout_s,
                    http_client=build_http_client(
                        anthropic.DefaultAsyncHttpxClient,
                        self.limiter,
                        self.max_connections,
                        self.name,
                    ),
                )
            except anthropic.AnthropicError as exc:
                raise ProviderError(f"cannot build the Anthropic client: {exc}") from exc
        return self._client

    def render(self, prompt: Prompt, history: Sequence[Turn]) -> dict[str, Any]:
        """The request body: a pure function of its arguments (prefix stability relies on it)."""
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in prompt.tools
        ]
        system = [{"type": "text", "text": prompt.system, "cache_control": self.cache_control}]
        messages: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": prompt.context, "cache_control": self.cache_control}
                ],
            }
        ]
        for turn in history:
            messages.append(_render_turn(turn))
        # Rolling breakpoints: this turn's last block (written now) and the previous turn's
        # (read now: it was the last block of the previous request).
        for index in (len(messages) - 3, len(messages) - 1):
            if index > 0:
                last = messages[index]["content"][-1]
                messages[index]["content"][-1] = {**last, "cache_control": self.cache_control}
        return {"tools": tools, "system": system, "messages": messages}

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        body = self.render(prompt, history)
        extra: dict[str, Any] = {}
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        try:
            message = await self.client().messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=body["system"],
                tools=body["tools"],
                messages=body["messages"],
                timeout=timeout_s,
                **extra,
            )
        except anthropic.APIStatusError as exc:
            raise _status_error(exc) from exc
        except anthropic.APITimeoutError as exc:
            raise ProviderError(f"no response within {timeout_s:.1f} s (timed out)") from exc
        except anthropic.APIConnectionError as exc:
            raise ProviderError(f"connection failed: {exc}") from exc
        except anthropic.AnthropicError as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
        return _completion(message)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


def _render_turn(turn: Turn) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if isinstance(turn, AssistantTurn):
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        if not content:  # the API refuses an empty assistant message
            content.append({"type": "text", "text": "(no answer)"})
        return {"role": "assistant", "content": content}
    for output in turn.tool_outputs:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": output.call_id,
            "content": output.content,
        }
        if output.is_error:
            block["is_error"] = True
        content.append(block)
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    return {"role": "user", "content": content}


def _completion(message: anthropic.types.Message) -> Completion:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments, raw, error = parse_arguments(block.input)
            calls.append(ToolCall(block.id, block.name, arguments, raw, error))
    usage = message.usage
    return Completion(
        turn=AssistantTurn("\n".join(texts), tuple(calls)),
        usage=Usage(
            input_tokens=usage.input_tokens or 0,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
        ),
        stop_reason=str(message.stop_reason or ""),
    )


def _status_error(exc: anthropic.APIStatusError) -> ProviderError:
    detail = exc.api_message or exc.message
    if is_context_length(exc.status_code, detail):
        return ContextLengthError(f"context length exceeded (HTTP {exc.status_code}): {detail}")
    if exc.status_code == 429:
        return ProviderError(f"rate limited (HTTP 429) after the SDK's retries: {detail}")
    return ProviderError(f"HTTP {exc.status_code}: {detail}")
