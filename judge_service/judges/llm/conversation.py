"""The provider-neutral conversation the tool loop keeps, and what a provider answers.

The loop only ever sees these types; each provider renders them into its own
wire format (Anthropic Messages, OpenAI Chat Completions) and parses its
responses back. Rendering is a pure function of these frozen values, which is
what keeps the stable prefix of every request byte-identical turn to turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from judge_service.judges.base import Usage


@dataclass(frozen=True)
class ToolSpec:
    """What the model is shown of a tool: its name, description and argument schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model made it.

    `arguments` is the parsed object ({} when unparseable); `error` says why the
    raw arguments could not be used, and the loop sends that back to the model.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    error: str | None = None


@dataclass(frozen=True)
class AssistantTurn:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolOutput:
    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class UserTurn:
    """Tool results for the previous assistant turn, then an optional instruction."""

    tool_outputs: tuple[ToolOutput, ...] = ()
    text: str | None = None


Turn = AssistantTurn | UserTurn


@dataclass(frozen=True)
class Prompt:
    """The stable part of every request of one session: tools, system text, rollout context.

    `cache_key` names the stable prefix (prompt version + context digest); OpenAI
    gets it as ``prompt_cache_key`` so one rollout's turns reach the same cache.
    """

    system: str
    context: str
    tools: tuple[ToolSpec, ...]
    cache_key: str


@dataclass(frozen=True)
class Completion:
    turn: AssistantTurn
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""
    notes: tuple[str, ...] = ()  # what the provider noticed about the answer (transcript)
