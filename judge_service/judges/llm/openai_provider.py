"""`openai:<model>`: Chat Completions with tools, through the `openai` SDK.

Works with OpenAI and with OpenAI-compatible servers (vLLM, SGLang, Ollama,
...) through ``base_url``. Request layout: the system message (instructions +
rubric) and the user message with the rollout context come first and never
change, so automatic prefix caching (OpenAI from 1,024 tokens; vLLM's prefix
cache) covers them; ``prompt_cache_key`` names the rollout's prefix so its
turns are routed to the same cache. Usage: ``prompt_tokens`` minus
``prompt_tokens_details.cached_tokens`` (and ``cache_write_tokens`` where a
server reports it) is uncached input.

What differs between servers (the max-tokens field, which tool_choice values
work, whether to stream so that an abandoned request stops) is data in
`servers.py`; this module sends what it is given. Streamed replies are read
back by `openai_stream.py`. An
assistant turn with tool calls carries ``"content": ""``, never ``null``:
llama-cpp-python hands messages to the model's Jinja chat template as sent,
and templates that concatenate content fail on null (HTTP 500).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import openai

from judge_service.errors import ContextLengthError, ProviderError
from judge_service.judges.llm.arguments import parse_arguments
from judge_service.judges.llm.conversation import (
    AssistantTurn,
    Completion,
    Prompt,
    ToolCall,
    Turn,
)
from judge_service.judges.llm.openai_stream import collect, usage_of
from judge_service.judges.llm.provider import clip
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.judges.llm.sdk import (
    CONTEXT_LENGTH,
    ErrorRow,
    SDKOptions,
    SDKProvider,
    sdk_error_table,
)
from judge_service.judges.llm.servers import MaxTokensField, profile_for
from judge_service.judges.llm.servers import json_response_format as response_format_for

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.judges.llm.servers import WireOptions

# Self-hosted servers usually need no key, but the SDK refuses to start without one.
PLACEHOLDER_KEY = "not-needed"


class OpenAIProvider(SDKProvider[openai.AsyncOpenAI]):
    kind = "openai"
    default_base_url = "https://api.openai.com/v1"
    sdk_name = "OpenAI"
    sdk_error = openai.OpenAIError
    http_client_class = openai.DefaultAsyncHttpxClient
    base_url_env = "OPENAI_BASE_URL"
    client_class = openai.AsyncOpenAI
    errors = (
        # OpenAI names the case in the body's error.code, whatever its message says.
        ErrorRow(
            openai.APIStatusError,
            ContextLengthError,
            CONTEXT_LENGTH,
            test=lambda f: f.code == "context_length_exceeded",
        ),
        # asyncio's TimeoutError: the bound on a whole streamed reply (see _create).
        *sdk_error_table(
            status=openai.APIStatusError,
            timeout=(openai.APITimeoutError, TimeoutError),
            connection=openai.APIConnectionError,
            other=openai.OpenAIError,
        ),
    )

    def __init__(
        self,
        model: str,
        limiter: RateLimiter,
        *,
        send_prompt_cache_key: bool = True,
        max_tokens_field: MaxTokensField | None = None,
        json_response_format: Mapping[str, object] | None = None,
        stream: bool = False,
        **options: Unpack[SDKOptions],
    ) -> None:
        super().__init__(model, limiter, **options)
        self.send_prompt_cache_key = send_prompt_cache_key
        # Unset: max_completion_tokens for OpenAI itself, max_tokens for any other server.
        self.max_tokens_field: MaxTokensField = (
            max_tokens_field or profile_for("auto", self.endpoint_url()).max_tokens_field
        )
        # JSON tool mode: a request without tools asks for one JSON object, which the
        # server enforces with a grammar (llama.cpp, vLLM, SGLang, Ollama) or its own
        # JSON mode (OpenAI); a small model otherwise answers prose, turn after turn.
        self.json_response_format = dict(json_response_format or {})
        # Streamed requests, so that one the service gave up on stops at the server
        # (openai_stream.py); the family table decides by default.
        self.stream = stream

    @classmethod
    def configured_base_url(cls, settings: Settings) -> str | None:
        return settings.llm_openai_base_url

    @classmethod
    def settings_options(cls, settings: Settings, wire: WireOptions) -> dict[str, Any]:
        json_mode = settings.llm_tool_mode != "native" and wire.profile.json_object
        return {
            "send_prompt_cache_key": settings.llm_openai_prompt_cache_key,
            "max_tokens_field": wire.max_tokens_field,
            "json_response_format": response_format_for(wire.profile) if json_mode else None,
            "stream": wire.stream,
        }

    def cap_hint(self) -> str:
        fields = ("max_completion_tokens", "max_tokens")
        other = fields[1 - fields.index(self.max_tokens_field)]
        return (
            f"the server ignores {self.max_tokens_field}; set "
            f"JUDGE_LLM_OPENAI_MAX_TOKENS_FIELD={other} (or JUDGE_LLM_SERVER to its family)"
        )

    def credentials(self) -> tuple[str | None, str | None]:
        api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
        base_url = self.base_url or os.environ.get(self.base_url_env)
        if api_key is None and base_url:
            api_key = PLACEHOLDER_KEY
        return api_key, base_url

    def status_detail(self, exc: BaseException) -> str:
        """The server's own message: ``error.message`` of the body where there is one."""
        if not isinstance(exc, openai.APIStatusError):
            return super().status_detail(exc)
        body = exc.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            if isinstance(message, str) and message:
                return clip(message)
        if isinstance(body, str) and body:
            return clip(body)
        try:
            return clip(exc.response.text) or exc.message
        except Exception:  # a streamed body that cannot be read again
            return clip(exc.message)

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
        body: dict[str, Any] = {"tools": tools, "messages": messages}
        if tools and self.tool_choice != "auto":  # auto is the API's default with tools
            body["tool_choice"] = _tool_choice(self.tool_choice)
        return body

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        body = self.render(prompt, history)
        extra: dict[str, Any] = {self.max_tokens_field: max_tokens}
        if "tool_choice" in body:
            extra["tool_choice"] = body["tool_choice"]
        if body["tools"]:
            extra["tools"] = body["tools"]
        elif self.json_response_format:
            extra["response_format"] = self.json_response_format
        if self.send_prompt_cache_key:
            extra["prompt_cache_key"] = prompt.cache_key
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            extra["reasoning_effort"] = self.reasoning_effort
        if self.stream:
            extra["stream"] = True
            extra["stream_options"] = {"include_usage": True}
        where = self.where()
        with self.sdk_errors(timeout_s):
            response = await self.client().chat.completions.create(
                model=self.model, messages=body["messages"], timeout=timeout_s, **extra
            )
            if self.stream:
                # The SDK's timeout bounds each read, not the whole stream: bound it here.
                async with asyncio.timeout(timeout_s):
                    return await collect(response, where, max_tokens)
        return _completion(response, where)


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _render_turn(turn: Turn) -> list[dict[str, Any]]:
    if isinstance(turn, AssistantTurn):
        # "" and never null beside tool calls: see the module docstring.
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
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


def _completion(response: Any, where: str) -> Completion:
    if not response.choices:
        raise ProviderError(f"the response from {where} has no choices")
    choice = response.choices[0]
    calls: list[ToolCall] = []
    for call in choice.message.tool_calls or ():
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: not ours
            continue
        arguments, raw, error = parse_arguments(function.arguments or "")
        calls.append(ToolCall(call.id, function.name, arguments, raw, error))
    return Completion(
        turn=AssistantTurn(choice.message.content or "", tuple(calls)),
        usage=usage_of(response.usage),
        stop_reason=str(choice.finish_reason or ""),
    )
