"""Service side of the equivalence checker: a pool of math-verify zygotes."""

from __future__ import annotations

import asyncio
import functools
import math
import time

from judge_service.equivalence.result import EquivalencePolicy, EquivalenceResult
from sandbox.pool import Envelope, PoolOwner, ZygotePool

_HANDLER = "judge_service.equivalence.worker"
_KILL_GRACE_S = 1.0
# A whole solution ending in its answer (math-verify reads its last box); the parse and the
# worker's kill bound the time it may take.
MAX_ANSWER_CHARS = 16_000


class EquivalenceChecker(PoolOwner):
    """Checks answers against references in killable, confined workers.

    `timeout_s` bounds one check, wall-clock: math-verify's own alarms get
    shares of it, and the worker is killed shortly after it regardless.
    """

    def __init__(
        self,
        *,
        pool_size: int = 1,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        isolate: bool = True,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        pool = ZygotePool(
            _HANDLER, size=pool_size, isolate=isolate, startup_timeout_s=startup_timeout_s
        )
        super().__init__(pool, pool_size, "equivalence")

    def start(self) -> None:
        self.pool.start()

    def check(
        self, gold: str, pred: str, policy: EquivalencePolicy | None = None
    ) -> EquivalenceResult:
        """Is `pred` equivalent to the reference `gold`? Never raises for what the inputs are."""
        policy = policy or EquivalencePolicy()
        for name, text in (("gold", gold), ("pred", pred)):
            if not isinstance(text, str) or not text.strip():
                return EquivalenceResult("unknown", f"{name} must be a non-empty string")
            if len(text) > MAX_ANSWER_CHARS:
                reason = f"{name} is {len(text)} characters long; the limit is {MAX_ANSWER_CHARS}"
                return EquivalenceResult("unknown", reason)
        started = time.perf_counter()
        request = {
            "payload": {
                "gold": gold,
                "pred": pred,
                "policy": policy.to_dict(),
                "timeout_s": self.timeout_s,
            },
            "memory_bytes": self.memory_mb << 20,
            "cpu_s": math.ceil(self.timeout_s) + 1,
        }
        envelope = self.pool.call(request, self.timeout_s + _KILL_GRACE_S)
        return _to_result(envelope, self.timeout_s, (time.perf_counter() - started) * 1000)

    async def check_async(
        self, gold: str, pred: str, policy: EquivalencePolicy | None = None
    ) -> EquivalenceResult:
        call = functools.partial(self.check, gold, pred, policy)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)


def _to_result(envelope: Envelope, timeout_s: float, elapsed_ms: float) -> EquivalenceResult:
    if envelope.status == "done" and envelope.result is not None:
        return EquivalenceResult.from_dict(envelope.result)
    if envelope.status == "timeout":
        reason = f"the check ran past its {timeout_s:g} s limit and was stopped"
    elif envelope.status == "crashed" and envelope.signal == "SIGKILL":
        reason = "the check ran out of memory"
    else:
        reason = f"the checker failed ({envelope.status}): {envelope.message}"
    return EquivalenceResult("unknown", reason, duration_ms=elapsed_ms)
