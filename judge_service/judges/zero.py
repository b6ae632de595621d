"""The ``zero`` fallback judge, and ``none``: what a failed result names as its judge."""

from __future__ import annotations

from judge_service.judges.base import Judge, JudgeOutcome, JudgeRequest, SpanCheck


class ZeroJudge(Judge):
    """The ``zero`` fallback: no spans, so zero credit; the outcome advantage stands alone."""

    name = "zero"
    prompt_version = "none"

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        return JudgeOutcome(spans=[], turns=0)


ZERO_JUDGE = ZeroJudge()


class NoJudge(ZeroJudge):
    """``fallback: none``: nothing stands in for the failed judge; the result is failed."""

    name = "none"


NO_JUDGE = NoJudge()
