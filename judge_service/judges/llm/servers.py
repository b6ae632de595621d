"""What each family of OpenAI-compatible server accepts: one table, read by the auto defaults.

Every claim below was checked against the family's own docs or source; where
they disagree the source wins (the docs lag). ``JUDGE_LLM_SERVER`` picks a row
(``auto``: `openai` for no base URL or api.openai.com, else `generic`: the
``max_tokens`` field, which every family here reads, and no assumption about
tool_choice, so no warning). The judge reads from the row: the
max-tokens field (unless ``JUDGE_LLM_OPENAI_MAX_TOKENS_FIELD`` is set), which
``JUDGE_LLM_TOOL_CHOICE`` values are honoured, and whether the family's tool
calling works at all without a forced choice (a warning at build time says so).

- **OpenAI** (https://platform.openai.com/docs/api-reference/chat/create):
  ``max_completion_tokens`` (``max_tokens`` is deprecated and refused by
  reasoning models); tool_choice auto / required / named / none;
  ``prompt_cache_key`` and ``reasoning_effort`` (reasoning models only: others
  answer 400 "Unrecognized request argument supplied: reasoning_effort", as for
  any unknown field); json_object. /v1/models: owned_by "openai" / "system".
- **vLLM** (https://docs.vllm.ai/en/latest/features/tool_calling/,
  vllm/entrypoints/openai/protocol.py): both fields (``max_tokens``
  deprecated); named, auto, required (vLLM >= 0.8.3) and none; ``auto`` needs
  the server started with ``--enable-auto-tool-choice --tool-call-parser X``,
  else it answers 400. Unknown fields are ignored with a warning in the
  server's log ("The following fields were present in the request but
  ignored"), prompt_cache_key among them. reasoning_effort; json_object.
  owned_by "vllm".
- **SGLang** (sgl-project/sglang python/sglang/srt/entrypoints/openai/protocol.py):
  both fields (``max_tokens`` deprecated); auto / required / none / named
  (needs ``--tool-call-parser``); reasoning_effort; json_object; unknown fields
  ignored (plain pydantic models). owned_by "sglang".
- **Ollama** (https://docs.ollama.com/api/openai-compatibility, ollama
  openai/openai.go): ``max_tokens`` only; the request struct has no
  tool_choice, so it is ignored (tools are offered, never forced);
  reasoning_effort; json_object; unknown fields ignored (Go's decoder).
  owned_by: the model's namespace, "library" by default.
- **llama.cpp** ``llama-server`` (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md,
  tools/server/server-common.cpp ``oaicompat_chat_params_parse``): ``max_tokens``
  (read as ``n_predict``; max_completion_tokens is ignored); tools need
  ``--jinja``; tool_choice must be a string (auto / none / required): an object
  (named choice) is read as the default ``auto``. No reasoning_effort;
  json_object (response_format becomes a grammar). owned_by "llamacpp".
- **llama-cpp-python** (abetlen/llama-cpp-python llama_cpp/server/types.py,
  llama_cpp/llama_chat_format.py): ``max_tokens`` only (max_completion_tokens
  is ignored: generation then runs to the context size); with the model's own
  chat template, tool calls come back only for a *named* tool_choice (a grammar
  forces that tool's arguments); ``auto`` and ``required`` just render the
  template, so the model answers in text. Started with ``--chat_format
  chatml-function-calling`` instead, it answers ``auto`` with grammar-constrained
  tool calls (checked against 0.3.36 serving SmolLM2: ``required`` is then a 500),
  which is how `devtools/llama_server.py` runs it. Assistant messages are passed to the
  Jinja template as sent: ``"content": null`` in a tool-call turn breaks
  templates that concatenate content (HTTP 500). No reasoning_effort;
  json_object (grammar). owned_by "me". A plain request runs in a worker
  thread to its end, whether or not the client is still there; a streamed one
  checks ``request.is_disconnected()`` at every chunk, and its
  ``interrupt_requests`` (on by default) ends a stream early, with ``[DONE]``
  and no finish reason, when another request arrives. Streamed chunks carry
  no usage. The others stop a plain request when the client goes (vLLM's
  ``with_cancellation``, llama-server's connection check, SGLang's abort on
  disconnect, Go's request context in Ollama).

Every family above accepts ``"content": ""`` beside ``tool_calls``, which is
why the OpenAI provider sends that and never ``null``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from judge_service.config import Settings
from judge_service.errors import InputError

log = logging.getLogger(__name__)
V = TypeVar("V")

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]
# The JUDGE_LLM_TOOL_CHOICE forms, as the table records them: "named" is a tool's name.
ToolChoiceForm = Literal["auto", "required", "named"]


@dataclass(frozen=True)
class ServerProfile:
    name: str
    max_tokens_field: MaxTokensField
    tool_choices: frozenset[ToolChoiceForm]  # the forms the server honours
    # Tools work only with a forced choice (required or named): with auto the model is
    # never steered into the tool-call format.
    needs_forced_tool_choice: bool
    prompt_cache_key: Literal["used", "ignored"]
    reasoning_effort: bool
    json_object: bool
    owned_by: str | None  # what /v1/models reports; None when it varies
    rejects_unknown_fields: bool
    # response_format json_object takes a "schema" (llama-cpp-python's extension): JSON
    # mode then constrains each answer to the {"tool", "arguments"} envelope.
    json_object_schema: bool = False
    # A plain request runs to its end after the client has gone; a streamed one stops at
    # the next chunk. Such a server is sent streamed requests (JUDGE_LLM_OPENAI_STREAM=auto).
    stream_to_cancel: bool = False


_ALL: frozenset[ToolChoiceForm] = frozenset({"auto", "required", "named"})


def _profile(
    name: str,
    max_tokens_field: MaxTokensField,
    tool_choices: frozenset[ToolChoiceForm] = _ALL,
    *,
    needs_forced_tool_choice: bool = False,
    prompt_cache_key: Literal["used", "ignored"] = "ignored",
    reasoning_effort: bool = True,
    owned_by: str | None = None,
    rejects_unknown_fields: bool = False,
    json_object_schema: bool = False,
    stream_to_cancel: bool = False,
) -> ServerProfile:
    return ServerProfile(
        name,
        max_tokens_field,
        tool_choices,
        needs_forced_tool_choice,
        prompt_cache_key,
        reasoning_effort,
        json_object=True,  # every family here: a grammar or guided decoding
        owned_by=owned_by,
        rejects_unknown_fields=rejects_unknown_fields,
        json_object_schema=json_object_schema,
        stream_to_cancel=stream_to_cancel,
    )


PROFILES: dict[str, ServerProfile] = {
    p.name: p
    for p in (
        _profile(
            "openai",
            "max_completion_tokens",
            prompt_cache_key="used",
            rejects_unknown_fields=True,
        ),
        _profile("vllm", "max_completion_tokens", owned_by="vllm"),
        _profile("sglang", "max_completion_tokens", owned_by="sglang"),
        _profile("ollama", "max_tokens", frozenset({"auto"})),
        _profile(
            "llamacpp",
            "max_tokens",
            frozenset({"auto", "required"}),
            reasoning_effort=False,
            owned_by="llamacpp",
        ),
        _profile(
            "llama-cpp-python",
            "max_tokens",
            frozenset({"named"}),
            needs_forced_tool_choice=True,
            reasoning_effort=False,
            owned_by="me",
            json_object_schema=True,
            stream_to_cancel=True,
        ),
        # An unknown compatible server: max_tokens, which every family above reads.
        _profile("generic", "max_tokens"),
    )
}
SERVER_NAMES = ("auto", *PROFILES)


def is_openai_endpoint(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = urlsplit(base_url).hostname or ""
    return host == "api.openai.com"


def profile_for(server: str, base_url: str | None) -> ServerProfile:
    """The row for ``JUDGE_LLM_SERVER`` (``auto``: decided by the base URL)."""
    if server == "auto":
        return PROFILES["openai" if is_openai_endpoint(base_url) else "generic"]
    try:
        return PROFILES[server]
    except KeyError:
        raise ValueError(f"unknown server family {server!r}; one of {SERVER_NAMES}") from None


def profile_for_owner(owned_by: str) -> ServerProfile | None:
    """The family a /v1/models ``owned_by`` names, where it names one unambiguously."""
    return next((p for p in PROFILES.values() if p.owned_by == owned_by), None)


def tool_choice_form(value: str) -> ToolChoiceForm:
    return value if value in ("auto", "required") else "named"  # type: ignore[return-value]


def conformance_warnings(
    profile: ServerProfile, tool_choice: str, reasoning_effort: str | None
) -> list[str]:
    """What will not work as configured on this server family, for a warning at build time."""
    notes: list[str] = []
    form = tool_choice_form(tool_choice)
    if profile.needs_forced_tool_choice and form == "auto":
        notes.append(
            f"{profile.name} returns tool calls only for a forced tool_choice; with "
            "JUDGE_LLM_TOOL_CHOICE=auto every turn will come back as text (name a tool, "
            "e.g. submit_spans, start the server with a tool-calling chat format, e.g. "
            "llama-cpp-python's --chat_format chatml-function-calling, or use "
            "JUDGE_LLM_TOOL_MODE=json)"
        )
    elif form not in profile.tool_choices:
        honoured = ", ".join(sorted(profile.tool_choices))
        notes.append(
            f"{profile.name} does not honour JUDGE_LLM_TOOL_CHOICE={tool_choice} "
            f"(it honours: {honoured}; 'named' means a tool name such as submit_spans)"
        )
    if reasoning_effort is not None and not profile.reasoning_effort:
        notes.append(f"{profile.name} ignores JUDGE_LLM_REASONING_EFFORT")
    return notes


@dataclass(frozen=True)
class WireOptions:
    """What one judge sends, resolved from the settings and its server's row."""

    tool_choice: str  # auto | required | a tool name
    reasoning_effort: str | None
    max_tokens_field: MaxTokensField  # OpenAI-compatible only
    profile: ServerProfile
    stream: bool = False  # OpenAI-compatible only


# What a JSON-mode answer must look like (judges/llm/json_mode.py reads it).
JSON_MODE_ENVELOPE = {
    "type": "object",
    "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
    "required": ["tool", "arguments"],
}


def json_response_format(profile: ServerProfile) -> dict[str, object]:
    """The ``response_format`` of a JSON-mode request to a server of this family."""
    if profile.json_object_schema:
        return {"type": "json_object", "schema": JSON_MODE_ENVELOPE}
    return {"type": "json_object"}


def per_judge(values: Mapping[str, V], spec: str, kind: str) -> V | None:
    """The entry for `spec` in a setting keyed like JUDGE_LLM_RATE_LIMITS: the spec itself,
    then its provider, then "*"."""
    for key in (spec, kind, "*"):
        if key in values:
            return values[key]
    return None


def wire_options(
    settings: Settings, kind: str, spec: str, tool_names: Collection[str]
) -> WireOptions:
    """JUDGE_LLM_TOOL_CHOICE, JUDGE_LLM_REASONING_EFFORT, JUDGE_LLM_SERVER and
    JUDGE_LLM_OPENAI_MAX_TOKENS_FIELD as they apply to `spec`; a tool choice that names
    none of the judge's tools is a settings error."""
    choice = per_judge(settings.llm_tool_choice, spec, kind) or "auto"
    if choice not in ("auto", "required") and choice not in tool_names:
        raise InputError(
            f"JUDGE_LLM_TOOL_CHOICE for {spec} is {choice!r}: not auto, required, or one of "
            f"the judge's tools ({', '.join(sorted(tool_names))})",
            field="settings.llm_tool_choice",
        )
    effort = per_judge(settings.llm_reasoning_effort, spec, kind)
    if kind == "openai":
        # The SDK's own variable counts too: it is where the client will send.
        base_url = settings.llm_openai_base_url or os.environ.get("OPENAI_BASE_URL")
        profile = profile_for(settings.llm_server, base_url)
        field = settings.llm_openai_max_tokens_field or profile.max_tokens_field
        notes = conformance_warnings(profile, choice, effort)
        if settings.llm_tool_mode == "json":  # no tools are sent: the tool choice is moot
            notes = [n for n in notes if "tool_choice" not in n]
        for note in notes:
            log.warning("judge %s: %s", spec, note)
        stream = {"on": True, "off": False}.get(
            settings.llm_openai_stream, profile.stream_to_cancel
        )
    else:  # the server table is about OpenAI-compatible servers
        profile, field, stream = PROFILES["generic"], "max_tokens", False
    return WireOptions(choice, effort, field, profile, stream)
