"""The agentic LLM judge: providers (Anthropic, OpenAI-compatible), the tool loop, prompts.

``options.judge = "anthropic:<model>"`` or ``"openai:<model>"`` selects it
through `judge_service.judges.registry`; see docs/llm-judges.md.
"""

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
