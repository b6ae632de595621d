"""The pre-flight: can an LLM judge's provider judge at all? Checked once before an offline run.

Two requests, each with a short timeout and no SDK retries, so a closed port
or a wrong URL fails within seconds rather than after every rollout's
fallback: the models list (a model id the server does not offer is a failure
that lists what it does offer), then one tiny request with the judge's tools
(a few output tokens), sent through the provider exactly as a session's turn
is (tool mode, max-tokens field, tool choice). If that request is refused but
the same request without tools is accepted, the server cannot do tools: in
``auto`` tool mode the provider switches to JSON mode; in ``native`` the
pre-flight fails and says which mode to set.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai

from judge_service.errors import ProviderError, StreamCutError
from judge_service.judges.llm.anthropic_provider import AnthropicProvider
from judge_service.judges.llm.conversation import Completion, Prompt
from judge_service.judges.llm.json_mode import AutoToolModeProvider, JsonModeProvider
from judge_service.judges.llm.llm_judge import LLMJudge
from judge_service.judges.llm.openai_provider import OpenAIProvider
from judge_service.judges.llm.provider import Provider
from judge_service.labels import DEFAULT_LABEL_SCORES

MAX_DETAIL = 300  # characters of a server's error kept in the message
MAX_IDS_SHOWN = 12
STATUS_ERRORS = (openai.APIStatusError, anthropic.APIStatusError)
CONNECTION_ERRORS = (openai.APIConnectionError, anthropic.APIConnectionError)
PROMPT_SYSTEM = "This is a connection check. Answer with the single word: ok."


@dataclass(frozen=True)
class PreflightResult:
    ok: bool
    # True: a tool call came back; False: requests with tools are refused (JSON mode then
    # works, or would); None: unknown (a tool call rarely fits in the few tokens asked for).
    tools_supported: bool | None
    message: str  # one line naming the base URL and the model
    base_url: str
    model: str
    models: tuple[str, ...] = ()  # the ids the server offers, when it lists them


class _Failed(Exception):
    pass


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _root_cause(exc: BaseException) -> str:
    """The innermost error (e.g. "ConnectError: [Errno 111] Connection refused"): the SDKs'
    own text for every connection failure is "Connection error."."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _status(exc: BaseException) -> int | None:
    cause = exc if isinstance(exc, STATUS_ERRORS) else exc.__cause__
    return cause.status_code if isinstance(cause, STATUS_ERRORS) else None


def _probe(inner: Provider, timeout_s: float) -> Provider:
    """A copy of the provider with a client of its own: no retries, a short timeout."""
    if not isinstance(inner, (OpenAIProvider, AnthropicProvider)):
        return inner
    probe = copy.copy(inner)
    probe.max_retries = 0
    probe.request_timeout_s = timeout_s
    probe._client = None  # built again on first use, with the settings above
    return probe


def _base_url(probe: Provider) -> str:
    if isinstance(probe, (OpenAIProvider, AnthropicProvider)):
        return str(probe.client().base_url).rstrip("/")
    return str(getattr(probe, "base_url", None) or "(in process)")


async def _model_ids(probe: Provider) -> tuple[str, ...] | None:
    """The ids the server offers; None where it has no models list (404/405)."""
    if not isinstance(probe, (OpenAIProvider, AnthropicProvider)):
        return None
    client: Any = probe.client()
    try:
        page = await client.models.list(**({"limit": 1000} if probe.kind == "anthropic" else {}))
    except STATUS_ERRORS as exc:
        if exc.status_code in (404, 405):
            return None
        if exc.status_code in (401, 403):
            raise _Failed(f"the API key was refused (HTTP {exc.status_code})") from exc
        detail = f"HTTP {exc.status_code}: {_short(exc.message)}"
        raise _Failed(f"listing the models failed ({detail})") from exc
    except CONNECTION_ERRORS as exc:
        raise _Failed(f"cannot connect ({_short(_root_cause(exc))})") from exc
    return tuple(str(model.id) for model in page.data)


def _offered(model: str, ids: tuple[str, ...]) -> bool:
    # Ollama lists "name:latest" and serves it as "name" too.
    return model in ids or f"{model}:latest" in ids


def _ids_text(ids: tuple[str, ...]) -> str:
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = f" and {len(ids) - MAX_IDS_SHOWN} more" if len(ids) > MAX_IDS_SHOWN else ""
    return (shown + more) or "none"


async def _ask(provider: Provider, prompt: Prompt, max_tokens: int, timeout_s: float) -> Completion:
    deadline = time.monotonic() + timeout_s
    return await provider.complete(prompt, [], max_tokens=max_tokens, deadline=deadline)


def _refusal(exc: ProviderError) -> str:
    status = _status(exc)
    detail = _short(str(exc))
    if status is None:
        return f"no answer ({detail})"
    if status in (401, 403):
        return f"the API key was refused ({detail})"
    if status == 404:
        return f"not found ({detail}); is the base URL right (OpenAI-compatible ones end in /v1)?"
    return f"the request was refused ({detail})"


async def preflight(
    judge: LLMJudge, *, timeout_s: float = 20.0, max_tokens: int = 16
) -> PreflightResult:
    """Check `judge`'s provider once: its models list, then one tiny request with the tools."""
    outer = judge.provider
    inner = outer.inner if isinstance(outer, (JsonModeProvider, AutoToolModeProvider)) else outer
    probe = _probe(inner, timeout_s)
    model = inner.model
    base_url = "(unknown URL)"
    ids: tuple[str, ...] | None = None

    def result(ok: bool, tools: bool | None, what: str) -> PreflightResult:
        verdict = "ready" if ok else "cannot judge"
        message = f"{inner.kind} judge, model {model} at {base_url}: {verdict}: {what}"
        return PreflightResult(ok, tools, message, base_url, model, ids or ())

    try:
        base_url = _base_url(probe)
        ids = await _model_ids(probe)
        if ids is not None and not _offered(model, ids):
            return result(
                False, None, f"the server does not offer {model}; it offers " + _ids_text(ids)
            )
        return await _request(judge, outer, probe, max_tokens, timeout_s, result)
    except _Failed as exc:
        return result(False, None, str(exc))
    except ProviderError as exc:  # the client could not be built (e.g. no API key)
        return result(False, None, _short(str(exc)))
    finally:
        if probe is not inner:
            await probe.aclose()


async def _request(
    judge: LLMJudge,
    outer: Provider,
    probe: Provider,
    max_tokens: int,
    timeout_s: float,
    result: Callable[[bool, bool | None, str], PreflightResult],
) -> PreflightResult:
    specs = judge._tools(list(DEFAULT_LABEL_SCORES))[1]  # the tools a session is shown
    prompt = Prompt(PROMPT_SYSTEM, "Answer: ok", specs, cache_key="judge-preflight")
    json_mode = isinstance(outer, JsonModeProvider) or (
        isinstance(outer, AutoToolModeProvider) and outer.using_json
    )
    first = JsonModeProvider(probe) if json_mode else probe
    # JSON mode sends no tools, so there is nothing to learn from describing them in the
    # text: without them the probe is ~100 tokens, not ~2,600 (a minute on a CPU server).
    ask = (
        Prompt(PROMPT_SYSTEM, "Answer: ok", (), cache_key="judge-preflight")
        if json_mode
        else prompt
    )
    try:
        completion = await _ask(first, ask, max_tokens, timeout_s)
    except ProviderError as exc:
        status = _status(exc)
        # A stream cut short is a refusal too: some servers refuse after the 200.
        refused = status is not None or isinstance(exc, StreamCutError)
        if json_mode or not refused or status in (401, 403, 404, 429):
            if status == 429:  # there, and busy: the SDK's retries handle that in the run
                return result(True, None, "the server answered 429 (rate limited) just now")
            raise _Failed(_refusal(exc)) from exc
        choice = getattr(probe, "tool_choice", "auto")
        forced = f" (tool_choice {choice})" if choice != "auto" else ""
        # Refused with tools: the same request without them tells a tool problem apart.
        try:
            await _ask(JsonModeProvider(probe), prompt, max_tokens, timeout_s)
        except ProviderError:
            # Both failed; a server can be left broken by what it could not do (llama-cpp-
            # python, after refusing `required` mid-stream), so the forced choice is named.
            hint = (
                f"; the first request forced tool_choice {choice}: if this server cannot "
                "do that, set another JUDGE_LLM_TOOL_CHOICE (auto, or a tool name)"
                if forced
                else ""
            )
            raise _Failed(_refusal(exc) + hint) from exc
        why = f"requests with tools{forced} are refused ({_short(str(exc))})"
        if isinstance(outer, AutoToolModeProvider):
            outer.switch_to_json(why)
            return result(True, False, f"{why}; using JSON tool mode")
        fix = "set JUDGE_LLM_TOOL_MODE=json (or auto)"
        if forced:  # the forced choice may be what this server cannot do
            fix = f"set another JUDGE_LLM_TOOL_CHOICE (auto, or a tool name), or {fix[4:]}"
        return result(False, False, f"{why}; {fix}")
    if json_mode:
        return result(True, None, "answered in JSON tool mode")
    tools = True if completion.turn.tool_calls else None
    return result(True, tools, "answered a request with tools")
