"""JSON tool mode: tool calls as JSON text, for servers whose tool calling is broken or absent.

`JsonModeProvider` wraps any `Provider`. It describes the tools in the system
text, sends no tools to the server, and asks for one JSON object per answer::

    {"tool": "<name>", "arguments": {...}}

Earlier calls go back to the server as that JSON text and tool results as
user messages ("Result of view_tokens (call 3): ..."); the answer is parsed
(a ```json fence or text around the one object is tolerated) and validated
with pydantic into a `ToolCall`, so the tool loop, span validation and the
repair turn run unchanged. An answer that is not one such object becomes a
`ToolCall` with ``error`` set, which the loop answers as it answers malformed
native arguments. Rendering is a pure function of the frozen turns, so the
system text and earlier messages are byte-identical turn to turn (prefix caching).

`AutoToolModeProvider` is native until the server shows it cannot do tools
(the pre-flight says so, or a session's first two replies carry no tool call
while no native tool call was ever seen from that endpoint), then JSON mode
for that endpoint for the rest of the process.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from judge_service.judges.llm.conversation import (
    AssistantTurn,
    Completion,
    Prompt,
    ToolCall,
    ToolOutput,
    ToolSpec,
    Turn,
    UserTurn,
)
from judge_service.judges.llm.prompt import canonical_json
from judge_service.judges.llm.provider import Provider

log = logging.getLogger(__name__)

ToolMode = Literal["native", "json", "auto"]
# The name of the ToolCall made from an answer that names no tool: the loop's error says it.
INVALID_REPLY = "json_reply"
# Stop reasons of an answer cut off by the output limit (OpenAI, Anthropic): such an answer
# carries no call at all, so that the loop's handling of a cut-off reply applies to it.
CUT_OFF = frozenset({"length", "max_tokens"})
FORMAT = '{"tool": "<tool name>", "arguments": {<the arguments, as the tool\'s schema says>}}'
REMINDER = f"Answer with exactly one JSON object: {FORMAT}"
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)
# strict=False: raw newlines and tabs inside strings, as models write long evidence.
_DECODER = json.JSONDecoder(strict=False)


class JsonToolCall(BaseModel):
    """One answer in JSON mode. The aliases are what models trained on other formats write
    (Hermes / Llama 3.1 style ``name`` and ``parameters``)."""

    model_config = ConfigDict(extra="ignore")

    tool: str = Field(min_length=1, validation_alias=AliasChoices("tool", "name"))
    arguments: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("arguments", "parameters", "args")
    )

    @field_validator("arguments", mode="before")
    @classmethod
    def _decoded(cls, value: object) -> object:
        # Some models encode the arguments object as a JSON string, as native calls carry it.
        if isinstance(value, str):
            try:
                return _DECODER.decode(value)
            except ValueError:
                return value
        return value


def system_text(prompt: Prompt) -> str:
    """The system text with the tools and the answer format: fixed for a prompt."""
    parts = [
        prompt.system,
        "# How to call tools",
        "This conversation has no built-in tool calling: you call a tool by writing JSON. "
        "Every answer must be exactly one JSON object, and nothing else:",
        FORMAT,
        "One tool call per answer. Its result comes back in the next message, which starts "
        '"Result of <tool name> (call <n>):". Keep calling tools until you call submit_spans.',
        "# Tools",
    ]
    parts += [_tool_text(spec) for spec in prompt.tools]
    return "\n\n".join(parts)


def _tool_text(spec: ToolSpec) -> str:
    return f"## {spec.name}\n{spec.description}\nArguments (JSON schema): " + canonical_json(
        spec.parameters
    )


def call_json(call: ToolCall) -> str:
    return json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)


def render_history(history: Sequence[Turn]) -> list[Turn]:
    """The conversation as plain text turns: calls as their JSON, results as user text."""
    numbers: dict[str, int] = {}
    rendered: list[Turn] = []
    for turn in history:
        if isinstance(turn, AssistantTurn):
            for call in turn.tool_calls:
                numbers.setdefault(call.id, len(numbers) + 1)
            rendered.append(AssistantTurn(_assistant_text(turn)))
        else:
            rendered.append(UserTurn(text=_user_text(turn, numbers)))
    return rendered


def _assistant_text(turn: AssistantTurn) -> str:
    if not turn.tool_calls:
        return turn.text or "(no answer)"
    # A malformed answer goes back as written, so the model sees what the error is about.
    if any(call.error is not None for call in turn.tool_calls):
        return turn.text or turn.tool_calls[0].raw_arguments or "(no answer)"
    return "\n".join(call_json(call) for call in turn.tool_calls)


def _user_text(turn: UserTurn, numbers: dict[str, int]) -> str:
    parts = [_result_text(output, numbers.get(output.call_id)) for output in turn.tool_outputs]
    if turn.text:
        parts += [turn.text, REMINDER]
    return "\n\n".join(parts) or REMINDER


def _result_text(output: ToolOutput, number: int | None) -> str:
    which = f" (call {number})" if number is not None else ""
    return f"Result of {output.name}{which}:\n{output.content}"


def parse_reply(text: str, call_id: str) -> ToolCall:
    """The one tool call in an answer, or a ToolCall whose ``error`` tells the model why not."""
    name = INVALID_REPLY

    def refused(reason: str) -> ToolCall:
        return ToolCall(call_id, name, {}, text, f"{reason}. {REMINDER}")

    fenced = [m.group(1) for m in _FENCE.finditer(text) if m.group(1).lstrip().startswith("{")]
    body = fenced[0] if len(fenced) == 1 else text
    objects, decode_error = _objects(body)
    calls = [o for o in objects if isinstance(o, dict) and ({"tool", "name"} & o.keys())]
    if len(calls) > 1:
        return refused(f"the answer holds {len(calls)} tool calls; make one per answer")
    if not calls:
        if decode_error is not None:
            return refused(f"the answer is not valid JSON ({decode_error})")
        if not objects:
            return refused("the answer holds no JSON object")
        calls = objects[:1]  # an object without "tool": pydantic says what is missing
    found = calls[0]
    if isinstance(found.get("tool", found.get("name")), str):
        name = found.get("tool", found.get("name")) or INVALID_REPLY
    try:
        parsed = JsonToolCall.model_validate(found)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the object'}: {e['msg']}"
            for e in exc.errors()
        )
        return refused(f"the JSON object does not fit the format ({problems})")
    return ToolCall(call_id, parsed.tool, parsed.arguments, json.dumps(parsed.arguments))


def _objects(text: str) -> tuple[list[Any], str | None]:
    """The top-level JSON objects in `text`, and the first decoding error met on the way."""
    found: list[Any] = []
    error: str | None = None
    at = text.find("{")
    while at != -1:
        try:
            value, end = _DECODER.raw_decode(text, at)
        except ValueError as exc:
            error = error or str(exc)
            at = text.find("{", at + 1)
            continue
        found.append(value)
        at = text.find("{", end)
    return found, error


def to_json_mode(prompt: Prompt) -> Prompt:
    return Prompt(system_text(prompt), prompt.context, (), prompt.cache_key)


def from_reply(completion: Completion, history: Sequence[Turn]) -> Completion:
    """The completion with its answer text read as a tool call."""
    turn = completion.turn
    if turn.tool_calls:  # a server that does tools after all: its calls are as good
        return completion
    if completion.stop_reason in CUT_OFF and not _objects(turn.text)[0]:
        return completion
    calls_before = sum(len(t.tool_calls) for t in history if isinstance(t, AssistantTurn))
    call = parse_reply(turn.text, f"json_call_{calls_before + 1}")
    return replace(completion, turn=AssistantTurn(turn.text, (call,)))


class _Wrapper(Provider):
    """A provider that hands each whole request to `inner` (its limiter, deadline, SDK)."""

    def __init__(self, inner: Provider) -> None:
        super().__init__(inner.model, inner.limiter, inner.request_timeout_s)
        self.inner = inner
        self.kind = inner.kind  # same name, so prices, metrics and cache keys are the judge's

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        raise NotImplementedError("complete() hands the request to the wrapped provider")

    def endpoint_url(self) -> str:
        return self.inner.endpoint_url()

    def cap_hint(self) -> str:
        return self.inner.cap_hint()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def complete_as_json(
    inner: Provider, prompt: Prompt, history: Sequence[Turn], max_tokens: int, deadline: float
) -> Completion:
    """One turn through `inner` in JSON mode."""
    completion = await inner.complete(
        to_json_mode(prompt), render_history(history), max_tokens=max_tokens, deadline=deadline
    )
    return from_reply(completion, history)


class JsonModeProvider(_Wrapper):
    async def complete(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, deadline: float
    ) -> Completion:
        return await complete_as_json(self.inner, prompt, history, max_tokens, deadline)


# Endpoints (provider name and base URL) switched to JSON mode, with why; and those that
# have answered with a native tool call, which are never switched by what a model says.
_SWITCHED: dict[str, str] = {}
_NATIVE_SEEN: set[str] = set()


def endpoint_key(provider: Provider) -> str:
    base_url = getattr(provider, "base_url", None) or os.environ.get(
        f"{provider.kind.upper()}_BASE_URL", "the default URL"
    )
    return f"{provider.name} at {base_url}"


def reset_tool_modes() -> None:
    """Forget every switch (tests)."""
    _SWITCHED.clear()
    _NATIVE_SEEN.clear()


class AutoToolModeProvider(_Wrapper):
    def __init__(self, inner: Provider) -> None:
        super().__init__(inner)
        self.endpoint = endpoint_key(inner)

    @property
    def using_json(self) -> bool:
        return self.endpoint in _SWITCHED

    def switch_to_json(self, reason: str) -> None:
        if self.endpoint in _SWITCHED:
            return
        _SWITCHED[self.endpoint] = reason
        log.warning(
            "%s cannot do tool calls (%s): JSON tool mode for it from now on, for the rest of "
            "this process (JUDGE_LLM_TOOL_MODE=auto)",
            self.endpoint,
            reason,
        )

    async def complete(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, deadline: float
    ) -> Completion:
        if self.using_json:
            return await complete_as_json(self.inner, prompt, history, max_tokens, deadline)
        completion = await self.inner.complete(
            prompt, history, max_tokens=max_tokens, deadline=deadline
        )
        if completion.turn.tool_calls:
            _NATIVE_SEEN.add(self.endpoint)
            return completion
        if not self._no_tools_shown(history, completion):
            return completion
        self.switch_to_json("a session's first two replies carried no tool call")
        # The same turn again, now in JSON mode: this session need not be lost to the switch.
        again = await complete_as_json(self.inner, prompt, history, max_tokens, deadline)
        return replace(again, usage=completion.usage + again.usage)

    def _no_tools_shown(self, history: Sequence[Turn], completion: Completion) -> bool:
        if self.endpoint in _NATIVE_SEEN or completion.stop_reason in CUT_OFF:
            return False
        earlier = [turn for turn in history if isinstance(turn, AssistantTurn)]
        return len(earlier) == 1 and not earlier[0].tool_calls


def with_tool_mode(provider: Provider, mode: ToolMode) -> Provider:
    if mode == "json":
        return JsonModeProvider(provider)
    if mode == "auto":
        return AutoToolModeProvider(provider)
    return provider
