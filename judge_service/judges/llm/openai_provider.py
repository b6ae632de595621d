"""`openai:<model>`: Chat Completions with tools, through the `openai` SDK.

Works with OpenAI and with OpenAI-compatible servers (vLLM, SGLang, Ollama,
...) through ``base_url``. Request layout: the system message (instructions +
rubric) and the user message with the rollout context come first and never
change, so automatic prefix caching (OpenAI from 1,024 tokens; vLLM's prefix
cache) covers them; ``prompt_cache_key`` names the rollout's prefix so its
turns are routed to the same cache. Usage: ``prompt_tokens`` minus
``prompt_tokens_details.cached_tokens`` (and ``cache_write_tokens`` where a
server reports it) is uncached input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Literal

import openai

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

# Self-hosted servers usually need no key, but the SDK refuses to start without one.
PLACEHOLDER_KEY = "not-needed"


class OpenAIProvider(Provider):
    kind = "openai"

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
        send_prompt_cache_key: bool = True,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        temperature: float | None = None,
    ) -> None:
        super().__init__(model, limiter, request_timeout_s)
        self.base_url = base_url
        self._api_key = api_key
        self.max_retries = max_retries
        self.max_connections = max_connections
        self.send_prompt_cache_key = send_prompt_cache_key
        self.max_tokens_field = max_tokens_field
        self.temperature = temperature
        self._client: openai.AsyncOpenAI | None = None

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
            base_url = self.base_url or os.environ.get("OPENAI_BASE_URL")
            if api_key is None and base_url:
                api_key = PLACEHOLDER_KEY
            try:
                self._client = openai.AsyncOpenAI(
                    api_key=api_key,
                    base_url=base_url,
                    max_retries=self.max_retries,
                    timeout=self.request_timeout_s,
                    http_client=build_http_client(
                        openai.DefaultAsyncHttpxClient,
                        self.limiter,
                        self.max_connections,
                        self.name,
                    ),
                )
            except openai.OpenAIError as exc:
                raise ProviderError(f"cannot build the OpenAI client: {exc}") from exc
        return self._client

    def render(self, prompt: Prompt, history: Sequence[Turn]) -> dict[str, Any]:
        """The request body: a pure function of its arguments (prefix stability relies on it)."""
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in prompt.tools
        ]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.context},
        ]
        for turn in history:
            messages.extend(_render_turn(turn))
        return {"tools": tools, "messages": messages}

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        body = self.render(prompt, history)
        extra: dict[str, Any] = {self.max_tokens_field: max_tokens}
        if self.send_prompt_cache_key:
            extra["prompt_cache_key"] = prompt.cache_key
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        try:
            response = await self.client().chat.completions.create(
                model=self.model,
                messages=body["messages"],
                tools=body["tools"],
                timeout=timeout_s,
                **extra,
            )
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"no response within {timeout_s:.1f} s (timed out)") from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(f"connection failed: {exc}") from exc
        except openai.OpenAIError as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
        return _completion(response)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


def _render_turn(turn: Turn) -> list[dict[str, Any]]:
    if isinstance(turn, AssistantTurn):
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    # Unparseable arguments go back as {}: some servers re-parse them.
                    "function": {
                        "name": call.name,
                        "arguments": "{}" if call.error else call.raw_arguments,
                    },
                }
                for call in turn.tool_calls
            ]
        return [message]
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": out.call_id, "content": out.content}
        for out in turn.tool_outputs
    ]
    if turn.text:
        messages.append({"role": "user", "content": turn.text})
    return messages


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return {}, f"the arguments are not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return {}, "the arguments must be a JSON object"
    return parsed, None


def _completion(response: Any) -> Completion:
    if not response.choices:
        raise ProviderError("the response has no choices")
    choice = response.choices[0]
    calls: list[ToolCall] = []
    for call in choice.message.tool_calls or ():
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: not ours
            continue
        raw = function.arguments or ""
        arguments, error = parse_arguments(raw)
        calls.append(ToolCall(call.id, function.name, arguments, raw, error))
    usage = response.usage
    details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
    cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
    prompt_tokens = usage.prompt_tokens if usage is not None else 0
    return Completion(
        turn=AssistantTurn(choice.message.content or "", tuple(calls)),
        usage=Usage(
            input_tokens=max(0, prompt_tokens - cached - written),
            cache_write_tokens=written,
            cache_read_tokens=cached,
            output_tokens=usage.completion_tokens if usage is not None else 0,
        ),
        stop_reason=str(choice.finish_reason or ""),
    )


def _status_error(exc: openai.APIStatusError) -> ProviderError:
    code = exc.code if isinstance(getattr(exc, "code", None), str) else ""
    detail = exc.message
    if code == "context_length_exceeded" or is_context_length(exc.status_code, detail):
        return ContextLengthError(f"context length exceeded (HTTP {exc.status_code}): {detail}")
    if exc.status_code == 429:
        return ProviderError(f"rate limited (HTTP 429) after the SDK's retries: {detail}")
    return ProviderError(f"HTTP {exc.status_code}: {detail}")
