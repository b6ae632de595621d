"""The agentic LLM judge: providers (Anthropic, OpenAI-compatible), the tool loop, prompts.

``options.judge = "anthropic:<model>"`` or ``"openai:<model>"`` selects it
through `judge_service.judges.registry`; see docs/llm-judges.md.

The names below are imported on first access (PEP 562): importing one module of this
package (the rate limiter, the judge class for an isinstance test) must not import the
vendor SDKs, which take seconds and which a server judging with rules never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_service.judges.llm.anthropic_provider import AnthropicProvider
    from judge_service.judges.llm.conversation import (
        AssistantTurn,
        Completion,
        Prompt,
        ToolCall,
        ToolOutput,
        ToolSpec,
        UserTurn,
    )
    from judge_service.judges.llm.llm_judge import (
        LLMJudge,
        LLMJudgeOutcome,
        build_llm_judge,
        default_tools,
    )
    from judge_service.judges.llm.loop import STOP_CONDITIONS, LoopConfig, ToolLoop
    from judge_service.judges.llm.openai_provider import OpenAIProvider
    from judge_service.judges.llm.pricing import Price, PriceTable
    from judge_service.judges.llm.prompt import PromptSet
    from judge_service.judges.llm.provider import Provider
    from judge_service.judges.llm.ratelimit import RateLimiter

_HOME = {  # each exported name: the module that defines it
    "AnthropicProvider": "anthropic_provider",
    "AssistantTurn": "conversation",
    "Completion": "conversation",
    "Prompt": "conversation",
    "ToolCall": "conversation",
    "ToolOutput": "conversation",
    "ToolSpec": "conversation",
    "UserTurn": "conversation",
    "LLMJudge": "llm_judge",
    "LLMJudgeOutcome": "llm_judge",
    "build_llm_judge": "llm_judge",
    "default_tools": "llm_judge",
    "STOP_CONDITIONS": "loop",
    "LoopConfig": "loop",
    "ToolLoop": "loop",
    "OpenAIProvider": "openai_provider",
    "Price": "pricing",
    "PriceTable": "pricing",
    "PromptSet": "prompt",
    "Provider": "provider",
    "RateLimiter": "ratelimit",
}

__all__ = [
    "STOP_CONDITIONS",
    "AnthropicProvider",
    "AssistantTurn",
    "Completion",
    "LLMJudge",
    "LLMJudgeOutcome",
    "LoopConfig",
    "OpenAIProvider",
    "Price",
    "PriceTable",
    "Prompt",
    "PromptSet",
    "Provider",
    "RateLimiter",
    "ToolCall",
    "ToolLoop",
    "ToolOutput",
    "ToolSpec",
    "UserTurn",
    "build_llm_judge",
    "default_tools",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # looked up once
    return value
