"""`LLMJudge`: the agentic span judge over any `Provider`, and its factories from `Settings`.

The judge renders the prompt once per rollout (tools sorted by name with
canonical JSON schemas, system text, rollout context), runs the tool loop,
and prices the usage. The tool set is whatever it is given; `default_tools`
adds the sandbox tools (run_python, check_equivalence) when their modules are
installed, and ``JUDGE_LLM_TOOLS`` narrows the set by name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from judge_service.config import Settings
from judge_service.errors import InputError, JudgeError
from judge_service.judges.base import Judge, JudgeLimits, JudgeOutcome, JudgeRequest, SpanCheck
from judge_service.judges.llm.conversation import Prompt, ToolSpec
from judge_service.judges.llm.json_mode import with_tool_mode
from judge_service.judges.llm.loop import LoopConfig, ToolLoop
from judge_service.judges.llm.pricing import PriceTable
from judge_service.judges.llm.prompt import PromptSet, canonical_json
from judge_service.judges.llm.provider import Provider
from judge_service.judges.llm.ratelimit import shared_limiter
from judge_service.judges.llm.servers import wire_options
from judge_service.judges.llm.transcript import Transcript
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.resolve import span_limits
from judge_service.spans import SpanLimits
from judge_service.tools.base import Tool
from judge_service.tools.check_equivalence import CheckEquivalenceTool
from judge_service.tools.run_python import RunPythonTool
from judge_service.tools.trace_tools import (
    SUBMIT_SPANS,
    SearchTraceTool,
    SubmitSpansTool,
    ViewTokensTool,
)

if TYPE_CHECKING:  # the vendor SDKs load when a provider is built (`_provider_class`)
    from judge_service.judges.llm.anthropic_provider import AnthropicProvider
    from judge_service.judges.llm.openai_provider import OpenAIProvider

log = logging.getLogger(__name__)


# Tools of the sandbox issue, used when their modules exist: (module, class).
@dataclass
class LLMJudgeOutcome(JudgeOutcome):
    pass


def endpoint(provider: Provider) -> str | None:
    """The base URL `provider` sends to: its own ``base_url``, that of the provider it wraps
    (a wrapper holding one), else the SDK's environment variable (e.g. OPENAI_BASE_URL)."""
    current: object = provider
    for _ in range(4):
        url = getattr(current, "base_url", None)
        if url:
            return str(url).rstrip("/")
        held = getattr(current, "__dict__", {}).values()
        inner = [v for v in held if isinstance(v, Provider) and v is not current]
        if len(inner) != 1:
            break
        current = inner[0]
    url = os.environ.get(f"{getattr(provider, 'kind', '').upper()}_BASE_URL")
    return url.rstrip("/") if url else None


def tool_spec(tool: Tool) -> ToolSpec:
    # Round-tripping through sorted JSON fixes the key order the SDK will serialize.
    parameters = json.loads(canonical_json(tool.parameters))
    return ToolSpec(tool.name, tool.description, parameters)


class LLMJudge(Judge):
    def __init__(
        self,
        provider: Provider,
        *,
        tools: Sequence[Tool] = (),
        prompts: PromptSet | None = None,
        config: LoopConfig | None = None,
        prices: PriceTable | None = None,
        span_limits: SpanLimits | None = None,
        wire_key: Mapping[str, object] | None = None,
    ) -> None:
        names = [tool.name for tool in tools]
        if SUBMIT_SPANS in names or len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique and not {SUBMIT_SPANS!r}: {names}")
        self.provider = provider
        self.span_limits = span_limits or SpanLimits()
        self.name = provider.name
        self.tools = {tool.name: tool for tool in tools}
        # Per label set: the tool map and its specs (rendered once, reused by every rollout).
        self._tool_sets: dict[tuple[str, ...], tuple[dict[str, Tool], tuple[ToolSpec, ...]]] = {}
        self.prompts = prompts or PromptSet.load()
        self.loop = ToolLoop(provider, self.prompts, config or LoopConfig())
        self.prices = prices or PriceTable()
        # How the requests are shaped (tool mode and choice, effort, temperature): what the
        # model is asked to do differs with them, so the cache key holds them.
        self.wire_key = dict(wire_key or {})
        self.prompt_version = self.prompts.version_for(self._tools(list(DEFAULT_LABEL_SCORES))[1])

    def key_material(
        self, label_scores: Mapping[str, float], limits: JudgeLimits
    ) -> dict[str, object]:
        # The prompt shows every score, and the session's budget shapes what it finds. The
        # endpoint: two servers may serve different weights under one model name.
        return {
            "label_scores": dict(sorted(label_scores.items())),
            "limits": [limits.max_turns, limits.max_tool_calls, limits.deadline_s],
            "endpoint": endpoint(self.provider),
            "wire": self.wire_key,
        }

    def _tools(self, labels: Sequence[str]) -> tuple[dict[str, Tool], tuple[ToolSpec, ...]]:
        key = tuple(labels)
        if key not in self._tool_sets:
            if len(self._tool_sets) >= 64:  # label sets come from requests: keep it bounded
                self._tool_sets.clear()
            submit = SubmitSpansTool(labels, self.span_limits)
            tools = dict(sorted({**self.tools, SUBMIT_SPANS: submit}.items()))
            self._tool_sets[key] = tools, tuple(tool_spec(tool) for tool in tools.values())
        return self._tool_sets[key]

    def build_prompt(self, request: JudgeRequest, specs: tuple[ToolSpec, ...]) -> Prompt:
        system = self.prompts.system_text(request.label_scores)
        context = self.prompts.context_text(request)
        digest = hashlib.sha256(
            "\0".join((self.prompt_version, system, context)).encode("utf-8", "surrogatepass")
        ).hexdigest()
        return Prompt(system, context, specs, cache_key=f"judge-{digest[:32]}")

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        tools, specs = self._tools(request.labels)
        prompt = self.build_prompt(request, specs)
        transcript = Transcript()
        transcript.prompt(prompt, judge=self.name, prompt_version=self.prompt_version)
        try:
            outcome = await self.loop.run(request, prompt, tools, check, transcript)
        except JudgeError as exc:
            if isinstance(exc.partial, JudgeOutcome):
                raise exc.with_partial(self.priced(exc.partial)) from exc.__cause__
            raise
        return self.priced(outcome)

    def priced(self, outcome: JudgeOutcome) -> LLMJudgeOutcome:
        return LLMJudgeOutcome(
            spans=outcome.spans,
            turns=outcome.turns,
            tool_calls=outcome.tool_calls,
            usage=outcome.usage,
            transcript=outcome.transcript,
            cost_usd=self.prices.cost(self.name, outcome.usage),
        )

    async def aclose(self) -> None:
        await self.provider.aclose()


def default_tools(settings: Settings) -> list[Tool]:
    """view_tokens, search_trace, run_python and check_equivalence, narrowed by llm_tools.
    All four are part of the package: a broken one fails the import of this module, so no
    LLM judge can be built and /readyz says why, never a judge quietly short of a tool."""
    tools: list[Tool] = [
        ViewTokensTool(settings.llm_view_max_tokens),
        SearchTraceTool(),
        RunPythonTool(settings=settings),
        CheckEquivalenceTool(settings=settings),
    ]
    if settings.llm_tools is not None:
        wanted = set(settings.llm_tools)
        unknown = wanted - {tool.name for tool in tools}
        if unknown:
            raise InputError(
                f"unknown or unavailable judge tools: {sorted(unknown)}", field="settings.llm_tools"
            )
        tools = [tool for tool in tools if tool.name in wanted]
    return tools


def _rate_limit(
    settings: Settings, spec: str, kind: str
) -> tuple[str, float | None, float | None, int | None]:
    """The quota entry that applies to `spec`: its key in JUDGE_LLM_RATE_LIMITS (a spec, a
    provider or "*"), rpm, tpm and concurrency. The key, not the caller's model string,
    names the limiter (and its request slots), so rotating model names under a
    provider-wide quota cannot multiply it."""
    limits = settings.llm_rate_limits
    for key in (spec, kind, "*"):
        entry = limits.get(key)
        if entry:
            slots = entry.get("concurrency")
            return key, entry.get("rpm"), entry.get("tpm"), int(slots) if slots else None
    return spec, None, None, None


def _provider_class(kind: str) -> type[AnthropicProvider] | type[OpenAIProvider]:
    """The provider class of `kind`, its vendor SDK imported only now: ``anthropic`` and
    ``openai`` take seconds to import, and a server judging with rules never needs them."""
    if kind == "anthropic":
        from judge_service.judges.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider
    if kind == "openai":
        from judge_service.judges.llm.openai_provider import OpenAIProvider

        return OpenAIProvider
    raise InputError(f"unknown LLM provider {kind!r}", field="options.judge")


def build_llm_judge(kind: str, model: str, settings: Settings) -> LLMJudge:
    """``anthropic:<model>`` or ``openai:<model>`` configured from the settings."""
    if not model:
        raise InputError(f"the {kind} judge needs a model: {kind}:<model>", field="options.judge")
    spec = f"{kind}:{model}"
    quota, rpm, tpm, concurrency = _rate_limit(settings, spec, kind)
    tools = default_tools(settings)
    provider_class = _provider_class(kind)
    wire = wire_options(settings, kind, spec, [SUBMIT_SPANS, *(t.name for t in tools)])
    base_url = provider_class.configured_base_url(settings)
    limiter = shared_limiter(quota, base_url or "", rpm, tpm, concurrency)
    provider = provider_class.from_settings(model, limiter, settings, wire)
    return LLMJudge(
        with_tool_mode(provider, settings.llm_tool_mode),
        tools=tools,
        prompts=PromptSet.load(settings.llm_prompt_version, settings.llm_prompts_dir),
        config=LoopConfig(
            max_tokens_per_call=settings.llm_max_tokens_per_call,
            tool_timeout_s=settings.llm_tool_timeout_s,
            max_idle_replies=settings.llm_max_idle_replies,
            max_input_tokens=settings.llm_max_input_tokens,
        ),
        prices=PriceTable(settings.llm_prices, settings.llm_cache_ttl),
        span_limits=span_limits(settings),
        wire_key={
            "tool_mode": settings.llm_tool_mode,
            "tool_choice": wire.tool_choice,
            "reasoning_effort": wire.reasoning_effort,
            "temperature": settings.llm_temperature,
        },
    )
