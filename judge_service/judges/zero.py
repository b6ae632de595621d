"""The ``zero`` fallback judge."""

from __future__ import annotations

from judge_service.judges.base import Judge, JudgeOutcome, JudgeRequest, SpanCheck


class ZeroJudge(Judge):
    """The ``zero`` fallback: no spans, so zero credit; the outcome advantage stands alone."""

    name = "zero"
    prompt_version = "none"

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        return JudgeOutcome(spans=[], turns=0)


ZERO_JUDGE = ZeroJudge()
