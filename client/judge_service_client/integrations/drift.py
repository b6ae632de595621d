"""The judge's drift verdict in a training run: asked every few steps, logged, and, when
told, a reason to stop.

`DriftWatch` is what the TRL and verl integrations hold (``judge_drift_every``,
``judge_stop_on_bad``; verl reads ``JUDGE_DRIFT_EVERY`` and ``JUDGE_STOP_ON_BAD``). It asks
``GET /v1/audit/drift`` every `every` training steps, logs the verdict (a warning once it
is not ``ok``) and returns it as a number for the trainer's metrics (0 ok, 1 drifting,
2 bad). With `stop_on_bad` a ``bad`` verdict raises `JudgeDriftError`, which ends the run
before another step trains on a judge gone wrong. A failing audit call never stops
training: it is logged, and the next check asks again.
"""

from __future__ import annotations

import logging

from judge_service_client.audit import DriftReport
from judge_service_client.client import AsyncJudgeClient, JudgeClient
from judge_service_client.client.errors import JudgeDriftError

log = logging.getLogger(__name__)

LEVELS = ("ok", "drifting", "bad")

__all__ = ["DriftWatch", "JudgeDriftError"]


class DriftWatch:
    def __init__(self, every: int = 50, *, stop_on_bad: bool = False) -> None:
        if every < 0:
            raise ValueError(f"judge_drift_every must be >= 0 (0: never ask), not {every}")
        self.every = every
        self.stop_on_bad = stop_on_bad
        self.last: DriftReport | None = None

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def check(self, client: JudgeClient, step: int) -> int | None:
        """The verdict as 0/1/2 when asked at this step (None when not due or not known)."""
        if not self.due(step):
            return None
        try:
            report = client.drift(points=1)
        except Exception as exc:
            log.warning("judge drift audit unavailable at step %d: %s", step, exc)
            return None
        return self.seen(report, step)

    async def acheck(self, client: AsyncJudgeClient, step: int) -> int | None:
        if not self.due(step):
            return None
        try:
            report = await client.drift(points=1)
        except Exception as exc:
            log.warning("judge drift audit unavailable at step %d: %s", step, exc)
            return None
        return self.seen(report, step)

    def seen(self, report: DriftReport, step: int) -> int:
        self.last = report
        level = LEVELS.index(report.verdict)
        if level:
            for judge in report.judges:
                if judge.verdict != "ok":
                    log.warning(
                        "judge drift at step %d: %s (%s) is %s: %s",
                        step,
                        judge.judge,
                        judge.prompt_version,
                        judge.verdict,
                        judge.reason,
                    )
        else:
            log.info("judge drift at step %d: ok", step)
        if report.verdict == "bad" and self.stop_on_bad:
            raise JudgeDriftError(report)
        return level
