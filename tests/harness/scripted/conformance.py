"""Where the scripted servers are as strict as real ones, so the fast tests catch wire bugs.

Each wire asks `openai_refusal` / `anthropic_refusal` before playing a script,
and cuts a scripted reply longer than the request's output cap (`cut`), as a
real server stops generating there. What each check copies:

- unknown top-level request fields: OpenAI answers 400 "Unrecognized request
  argument supplied: X", Anthropic 400 "X: Extra inputs are not permitted";
- ``"content": null`` beside ``tool_calls``: llama-cpp-python hands it to the
  model's Jinja chat template, which fails on it: HTTP 500 with the error and
  a dump of the request (kilobytes; real servers paste their validation dumps);
- Anthropic's empty or whitespace-only text blocks and empty messages (400);
- tool_choice without tools, a named tool that is not offered, ``tools: []``;
- the output cap: the reply is cut, ``finish_reason: "length"`` /
  ``stop_reason: "max_tokens"``, and the usage reports the cap.

`Strictness` switches them per server; `LLAMA_CPP_PYTHON` is a server that
accepts any field and honours only ``max_tokens`` as the cap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.harness.scripted.script import Call, Fault, Reply

# Chat Completions request fields (platform.openai.com/docs/api-reference/chat/create).
OPENAI_FIELDS = frozenset(
    {
        "model",
        "messages",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
# Messages API request fields (docs.anthropic.com/en/api/messages).
ANTHROPIC_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "metadata",
        "thinking",
        "output_config",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
    }
)


@dataclass(frozen=True)
class Strictness:
    unknown_fields: bool = True  # 400 for a request field the API does not know
    null_content: bool = True  # 500 for an assistant tool-call turn with content null
    # The request fields read as the output cap, in order; others are ignored.
    cap_fields: tuple[str, ...] = ("max_completion_tokens", "max_tokens")
    # A streamed reply ends with a usage chunk when stream_options.include_usage asks.
    stream_usage: bool = True


STRICT = Strictness()  # as the real OpenAI and Anthropic APIs
# Any field accepted (pydantic's default), max_completion_tokens ignored (generation runs
# to the context size), content null fatal to the chat template, no usage in a stream.
LLAMA_CPP_PYTHON = Strictness(unknown_fields=False, cap_fields=("max_tokens",), stream_usage=False)


def _openai_error(status: int, message: str) -> Fault:
    return Fault(status, message=message)


def openai_refusal(body: dict[str, Any], strict: Strictness) -> Fault | None:
    if strict.unknown_fields:
        unknown = sorted(set(body) - OPENAI_FIELDS)
        if unknown:
            return _openai_error(400, f"Unrecognized request argument supplied: {unknown[0]}")
    tools = body.get("tools")
    if tools is not None and not tools:
        return _openai_error(400, "[] is too short - 'tools'")
    choice = body.get("tool_choice")
    if choice is not None:
        if not tools:
            return _openai_error(
                400,
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when "
                "'tools' are specified.",
            )
        if isinstance(choice, dict):
            name = choice.get("function", {}).get("name")
            if name not in {t["function"]["name"] for t in tools}:
                return _openai_error(400, f"Invalid value for 'tool_choice': no tool {name!r}.")
        elif choice not in ("auto", "required", "none"):
            return _openai_error(400, f"Invalid value for 'tool_choice': {choice!r}.")
    if strict.null_content:
        for message in body.get("messages", []):
            tool_turn = message.get("role") == "assistant" and message.get("tool_calls")
            if tool_turn and "content" in message and message["content"] is None:
                dump = json.dumps(body["messages"])[:3000]
                return _openai_error(
                    500,
                    'can only concatenate str (not "NoneType") to str; while rendering '
                    f"the chat template for messages: {dump}",
                )
    return None


def _anthropic_error(message: str) -> Fault:
    return Fault(400, message=message)


def anthropic_refusal(body: dict[str, Any], strict: Strictness) -> Fault | None:
    if strict.unknown_fields:
        unknown = sorted(set(body) - ANTHROPIC_FIELDS)
        if unknown:
            return _anthropic_error(f"{unknown[0]}: Extra inputs are not permitted")
    if "max_tokens" not in body:
        return _anthropic_error("max_tokens: Field required")
    for index, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        final_assistant = index == len(body["messages"]) - 1 and message["role"] == "assistant"
        if not content and not final_assistant:
            return _anthropic_error(
                f"messages.{index}: all messages must have non-empty content except for "
                "the optional final assistant message"
            )
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "text":
                if not block.get("text"):
                    return _anthropic_error("messages: text content blocks must be non-empty")
                if not block["text"].strip():
                    return _anthropic_error(
                        "messages: text content blocks must contain non-whitespace text"
                    )
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type")
        names = {t["name"] for t in body.get("tools", [])}
        if kind not in ("auto", "any", "tool", "none"):
            return _anthropic_error(f"tool_choice.type: unknown type {kind!r}")
        if kind in ("any", "tool") and not names:
            return _anthropic_error("tool_choice: requires tools")
        if kind == "tool" and choice.get("name") not in names:
            return _anthropic_error(f"tool_choice.name: no tool {choice.get('name')!r}")
    return None


def openai_cap(body: dict[str, Any], strict: Strictness) -> int | None:
    for name in strict.cap_fields:
        if isinstance(body.get(name), int):
            return int(body[name])
    return None


def cut(reply: Reply, cap: int | None) -> Reply:
    """`reply` as a server that stops at `cap` output tokens sends it: the same share of its
    text and of its calls' argument text, the rest dropped, marked cut off."""
    if cap is None or reply.output_tokens <= cap:
        return reply
    raws = [c.raw if c.raw is not None else json.dumps(c.arguments) for c in reply.calls]
    budget = (len(reply.text) + sum(map(len, raws))) * cap // reply.output_tokens
    text = reply.text[:budget]
    budget -= len(text)
    calls: list[Call] = []
    for call, raw in zip(reply.calls, raws, strict=True):
        if budget <= 0:
            break
        kept = raw[:budget]
        budget -= len(kept)
        calls.append(call if kept == raw else Call(call.name, raw=kept))
    return Reply(tuple(calls), text, output_tokens=cap, cut_off=True)
