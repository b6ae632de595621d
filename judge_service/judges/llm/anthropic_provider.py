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

The API refuses empty and whitespace-only text blocks, so a turn's text is
sent only when it has something in it. ``JUDGE_LLM_TOOL_CHOICE`` maps to
``tool_choice`` (auto, ``any`` for required, ``tool`` for a name), and
``JUDGE_LLM_REASONING_EFFORT`` to ``output_config.effort``
(https://platform.claude.com/docs/en/build-with-claude/effort): it needs no
extended thinking and governs text and tool calls alike. Extended thinking
itself is not used: in a tool loop its blocks must be sent back verbatim
with their signatures, and it refuses a forced tool_choice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack

import anthropic

from judge_service.judges.base import Usage
from judge_service.judges.llm.arguments import parse_arguments as parse_text_arguments
from judge_service.judges.llm.conversation import (
    AssistantTurn,
    Completion,
    Prompt,
    ToolCall,
    Turn,
)
from judge_service.judges.llm.provider import clip
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.judges.llm.sdk import SDKOptions, SDKProvider, sdk_error_table

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.judges.llm.servers import WireOptions


def parse_arguments(value: object) -> tuple[dict[str, Any], str, str | None]:
    """(arguments, raw text, error) from a tool call's input as the API returned it."""
    if isinstance(value, dict):
        return value, json.dumps(value, ensure_ascii=False), None
    return parse_text_arguments(value if isinstance(value, str) else json.dumps(value))


class AnthropicProvider(SDKProvider[anthropic.AsyncAnthropic]):
    kind = "anthropic"
    default_base_url = "https://api.anthropic.com"
    sdk_name = "Anthropic"
    sdk_error = anthropic.AnthropicError
    http_client_class = anthropic.DefaultAsyncHttpxClient
    base_url_env = "ANTHROPIC_BASE_URL"
    client_class = anthropic.AsyncAnthropic
    errors = sdk_error_table(
        status=anthropic.APIStatusError,
        timeout=anthropic.APITimeoutError,
        connection=anthropic.APIConnectionError,
        other=anthropic.AnthropicError,
    )

    def __init__(
        self,
        model: str,
        limiter: RateLimiter,
        *,
        cache_ttl: Literal["5m", "1h"] = "5m",
        **options: Unpack[SDKOptions],
    ) -> None:
        super().__init__(model, limiter, **options)
        self.cache_control: dict[str, str] = {"type": "ephemeral", "ttl": cache_ttl}

    @classmethod
    def configured_base_url(cls, settings: Settings) -> str | None:
        return settings.llm_anthropic_base_url

    @classmethod
    def settings_options(cls, settings: Settings, wire: WireOptions) -> dict[str, Any]:
        return {"cache_ttl": settings.llm_cache_ttl}

    def cap_hint(self) -> str:
        return "the server ignores max_tokens (an Anthropic-compatible proxy?)"

    def status_detail(self, exc: BaseException) -> str:
        if not isinstance(exc, anthropic.APIStatusError):
            return super().status_detail(exc)
        # The SDK reads error.message out of the body; its own message is the fallback.
        return clip(exc.api_message or exc.message)

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
        body: dict[str, Any] = {"tools": tools, "system": system, "messages": messages}
        if tools and self.tool_choice != "auto":  # auto is the API's default with tools
            body["tool_choice"] = _tool_choice(self.tool_choice)
        return body

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        body = self.render(prompt, history)
        extra: dict[str, Any] = {}
        if body["tools"]:
            extra["tools"] = body["tools"]
        if "tool_choice" in body:
            extra["tool_choice"] = body["tool_choice"]
        if self.reasoning_effort is not None:
            extra["output_config"] = {"effort": self.reasoning_effort}
        if self.temperature is not None:
            # Not a parameter of this SDK's create(); the API still reads it.
            extra["extra_body"] = {"temperature": self.temperature}
        with self.sdk_errors(timeout_s):
            message = await self.client().messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=body["system"],
                messages=body["messages"],
                timeout=timeout_s,
                **extra,
            )
        return _completion(message)


def _tool_choice(choice: str) -> dict[str, str]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def _render_turn(turn: Turn) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if isinstance(turn, AssistantTurn):
        if turn.text.strip():  # the API refuses empty and whitespace-only text blocks
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
    if turn.text and turn.text.strip():
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
