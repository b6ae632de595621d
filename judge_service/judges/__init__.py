"""The judge interface and the registry that turns ``options.judge`` into a judge."""

from judge_service.judges.base import (
    Judge,
    JudgeLimits,
    JudgeOutcome,
    JudgeRequest,
    SpanCheck,
    Usage,
)

__all__ = ["Judge", "JudgeLimits", "JudgeOutcome", "JudgeRequest", "SpanCheck", "Usage"]
