"""The drift audit of one process: counts each judged rollout, samples shadow checks, writes
chunks to the store, scores the window and runs the canaries when their period comes.

Nothing here is on a request's path but `observe`: a few dict updates and one random
draw. Shadow checks, chunk writes and canary runs are background tasks whose failures
are logged and dropped (the audit never fails a request), and at most `MAX_SHADOWS`
shadow checks are in flight (a burst skips samples rather than queue work).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from judge_service.credit import FloatArray
from judge_service.drift import metrics as drift_metrics
from judge_service.drift.canary import Canaries, canary_series
from judge_service.drift.observe import count_result, shadow_tally, submitted
from judge_service.drift.store import DriftStore
from judge_service.drift.verdict import Thresholds, Verdict, decide
from judge_service.drift.window import Tally, newest, oldest
from judge_service.schemas import Result
from judge_service.trace import Trace

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.pipeline import Engine

log = logging.getLogger(__name__)

MAX_SHADOWS = 4
POINTS_KEPT = 500
SCHEDULE_TICK_S = 15.0


def series_of(tenant: str, judge: str, prompt_version: str) -> str:
    return f"{tenant}|{judge}|{prompt_version}"


def split_series(series: str) -> tuple[str, str, str]:
    tenant, judge, version = series.split("|", 2)
    return tenant, judge, version


class DriftMonitor:
    def __init__(self, settings: Settings, store: DriftStore) -> None:
        self.settings = settings
        self.store = store
        self.canaries = Canaries(settings, store)
        self.limits = Thresholds(
            settings.drift_drifting_score,
            settings.drift_bad_score,
            settings.drift_canary_f1_drop,
            settings.drift_rate_rise,
        )
        self.verdicts: dict[str, Verdict] = {}  # the last scored, per series
        self._pending: dict[str, Tally] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._shadows = 0
        self._draw = random.Random()
        self._engine: Engine | None = None
        self._schedule: asyncio.Task[None] | None = None
        # The baseline as last decoded, by its stamp: read every scoring (a pin replaces
        # it, from any process), decoded again only when it changed.
        self._baselines: dict[str, tuple[tuple[float, ...], Tally]] = {}

    @property
    def chunks_kept(self) -> int:
        # Twice the window: the baseline is frozen from the first window before any trim.
        return 2 * math.ceil(self.settings.drift_window / self.settings.drift_chunk) + 4

    def attach(self, engine: Engine) -> None:
        """The engine canary runs judge with (a quiet view of it)."""
        self._engine = engine

    def start(self, engine: Engine) -> None:
        """Begin the canary schedule (time-based) for `engine`; idempotent."""
        self._engine = engine
        if self._schedule is None and self.settings.drift_canary_interval_s > 0:
            self._schedule = asyncio.get_running_loop().create_task(self._run_schedule())

    def observe(
        self,
        tenant: str,
        judge: str,
        prompt_version: str,
        result: Result,
        credit: FloatArray | None,
        trace: Trace,
        label_scores: Mapping[str, float],
    ) -> None:
        """Count one judged rollout (not a cache hit) of the judge asked for."""
        series = series_of(tenant, judge, prompt_version)
        tally = self._pending.get(series)
        if tally is None:
            tally = self._pending[series] = Tally()
        count_result(tally, result, credit)
        if tally.n == 1:
            tally.stamp()  # its first judgment; the last is stamped when it is written
        rate = self.settings.drift_shadow_rate
        sampled = rate and result.status != "failed" and self._draw.random() < rate
        if sampled and self._shadows < MAX_SHADOWS:
            self._shadows += 1
            self._spawn(self._shadow(series, trace, submitted(result), dict(label_scores)))
        if tally.n >= self.settings.drift_chunk:
            del self._pending[series]
            self._spawn(self._flush(series, tally))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _shadow(
        self,
        series: str,
        trace: Trace,
        spans: list[tuple[int, int, str]],
        label_scores: dict[str, float],
    ) -> None:
        try:
            found = await asyncio.to_thread(shadow_tally, trace, spans, label_scores)
        except Exception:
            log.exception("drift shadow check failed")
            return
        finally:
            self._shadows -= 1
        pending = self._pending.get(series)
        if pending is None:
            pending = self._pending[series] = Tally()
        pending.merge(found)

    async def _flush(self, series: str, tally: Tally) -> None:
        tally.stamp()
        try:
            await self.score(series, tally)
        except Exception as exc:  # the store down, a bad record: the audit waits
            log.warning("drift: could not score %s: %s", series, exc)
            return
        _, judge, _ = split_series(series)
        every = self.settings.drift_canary_every
        if every and judge in self.canary_judges:
            after = await self.store.add_count(judge, tally.n)
            mark = after // every
            if mark > (after - tally.n) // every and await self.store.claim(
                f"{judge}:k{mark}", 24 * 3600
            ):
                await self._canary(judge, f"k{mark}")

    async def score(self, series: str, tally: Tally | None = None) -> Verdict:
        """Write `tally` (if any) as the series' newest chunk and score the window."""
        store = self.store
        written = tally is not None and bool(tally.n or tally.counts)
        if tally is not None and written:
            await store.push(series, "chunks", tally.to_json(), self.chunks_kept)
        chunks = [Tally.from_json(c) for c in await store.read(series, "chunks")]
        size = self.settings.drift_window
        stored = await store.baseline(series)
        if stored is None:
            first = oldest(chunks, size)
            if first is not None:
                await store.set_baseline(series, first.to_json())
                stored = await store.baseline(series)
        baseline = None if stored is None else self._decoded(series, stored)
        window = newest(chunks, size)
        tenant, judge, version = split_series(series)
        runs = await store.read(canary_series(judge), "runs")
        verdict = decide(
            baseline,
            window,
            self.limits,
            baseline_size=size,
            canary_f1=[run.get("f1") for run in runs if run.get("prompt_version") == version],
        )
        if written:
            point = {
                "t": window.last_t or time.time(),
                "judgments": window.n,
                "verdict": verdict.verdict,
                "score": round(verdict.score, 5),
                "scores": {m.measure: m.score for m in verdict.measures},
            }
            await store.push(series, "points", point, POINTS_KEPT)
        self.verdicts[series] = verdict
        drift_metrics.set_verdict(judge, version, tenant, verdict, window)
        return verdict

    def _decoded(self, series: str, stored: dict[str, Any]) -> Tally:
        stamp = (float(stored.get("pinned_at") or 0.0), float(stored.get("last_t") or 0.0))
        known = self._baselines.get(series)
        if known is None or known[0] != stamp:
            known = self._baselines[series] = (stamp, Tally.from_json(stored))
        return known[1]

    async def pin(self, series: str) -> bool:
        """Make the series' current window its baseline (a known-good stretch, or after a
        deliberate change); False when the series has no judgments yet."""
        chunks = [Tally.from_json(c) for c in await self.store.read(series, "chunks")]
        window = newest(chunks, self.settings.drift_window)
        if not window.n:
            return False
        record = {**window.to_json(), "pinned_at": time.time()}
        await self.store.set_baseline(series, record, replace=True)
        return True

    @property
    def canary_judges(self) -> list[str]:
        return self.settings.drift_canary_judges or [self.settings.default_judge]

    async def _canary(self, judge: str, period: str) -> None:
        if self._engine is None:
            return
        try:
            await self.canaries.run(self._engine, judge, period)
        except Exception:
            log.exception("drift: canary run of %s failed", judge)

    async def _run_schedule(self) -> None:
        interval = self.settings.drift_canary_interval_s
        while True:
            period = int(time.time() // interval)
            for judge in self.canary_judges:
                try:
                    won = await self.store.claim(f"{judge}:t{period}", interval * 2)
                except Exception as exc:
                    log.warning("drift: canary claim failed: %s", exc)
                    continue
                if won:
                    await self._canary(judge, f"t{period}")
            await asyncio.sleep(min(interval, SCHEDULE_TICK_S))

    async def drain(self) -> None:
        """Write what is pending and wait for the background work (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        pending, self._pending = self._pending, {}
        for series, tally in pending.items():
            if tally.n or tally.counts:
                await self._flush(series, tally)

    async def aclose(self) -> None:
        if self._schedule is not None:
            self._schedule.cancel()
            self._schedule = None
        try:
            await self.drain()
        except Exception as exc:
            log.warning("drift: could not write the last chunk: %s", exc)
