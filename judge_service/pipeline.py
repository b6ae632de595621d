"""One rollout through the service: decode, mark, judge, validate, credit; and a batch of them.

Each failure is recorded once, at its boundary: bad input (tokenizer, ids,
limits) raises `InputError` for a single request and becomes a ``failed``
result inside a batch; a judge failure becomes a ``fallback`` result (rules
judge or zero credit; ``failed`` without credit under ``fallback: none``) whose
`error` names the boundary and whose ``judge.attempt`` reports the failed
judge's session apart from the judge that produced the spans; a training step
is never blocked by one bad rollout.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from judge_service import credit as credit_mod
from judge_service import lazy_sympy, metrics
from judge_service.config import Settings
from judge_service.credit import FloatArray, GroupAdvantage
from judge_service.drift.monitor import DriftMonitor
from judge_service.drift.store import open_drift_store
from judge_service.errors import InputError, JudgeError, LimitError, UnavailableError
from judge_service.group.settle import final_of, reference_settler
from judge_service.judges.base import (
    Judge,
    JudgeOutcome,
    JudgeRequest,
    SpanCheck,
)
from judge_service.judges.cache import JudgeCache
from judge_service.judges.registry import build_judge
from judge_service.judges.zero import NO_JUDGE, ZERO_JUDGE
from judge_service.judgment import Judgment, add_usage, attempt_of, spent, to_result
from judge_service.methods.reweight import Reweighter, check_rollout
from judge_service.offload import TEXT_CHARS_PER_TOKEN, off_loop
from judge_service.resolve import Resolved, cache_key, resolve
from judge_service.schemas import (
    BatchResponse,
    BatchStats,
    JudgeAttempt,
    JudgeInfo,
    Options,
    Result,
    Rollout,
    Status,
    UsageTotals,
)
from judge_service.spans import Span
from judge_service.store import Store
from judge_service.store.cache import CacheState, JudgmentCache, Looked
from judge_service.trace import Trace
from judge_service.trace.detokenize import LoadedTokenizer
from judge_service.trace.markers import marked_view
from judge_service.trace.tokenizer import TokenizerCache
from judge_service.validate import Rounds, Validator, Verdict
from judge_service.view.source import TraceSource

log = logging.getLogger(__name__)


class Engine:
    """Everything needed to judge rollouts in this process; one per app or CLI run."""

    def __init__(
        self,
        settings: Settings,
        tokenizers: TokenizerCache | None = None,
        store: Store | None = None,
        *,
        build_fallback: bool = True,
    ) -> None:
        self.settings = settings
        self.tokenizers = tokenizers or TokenizerCache.from_settings(settings)
        self.judges = JudgeCache(
            lambda spec: build_judge(spec, settings),
            settings.judge_patterns,
            settings.judge_cache_size,
        )
        self._slots = asyncio.Semaphore(settings.max_concurrency)
        # Without a store (the CLI) nothing is cached; results then carry no `cache` field.
        self.cache = JudgmentCache(store) if store is not None else None
        self.reweighter = Reweighter(settings, store)  # options.reweight (CSCR, CoRT)
        self.tenant = "open"  # whose cached judgments this engine reads and writes
        # The drift audit (drift/): with a store only, so the CLI's one-off runs skip it.
        self.audit: DriftMonitor | None = None
        if store is not None and settings.drift_enabled:
            self.audit = DriftMonitor(settings, open_drift_store(store))
            self.audit.attach(self)  # canaries by count run from any process that judges
        self.counted = True  # into judge_results_total and the cost counters (not canaries)
        # The fallback judge is built now, and sympy imported for its claims (0.5 s): a
        # rollout whose LLM session has just spent its deadline must not wait for that on
        # top. A server passes build_fallback=False: its warm-up thread imports both right
        # after start (api/app.py, heap.HOT_PATH_MODULES), so /healthz does not wait for
        # them, and the first rollout builds the judge (a constructor) or waits for them.
        if build_fallback:
            self.judges.get("rules", by_server=True)
            lazy_sympy.load()

    def for_tenant(self, tenant: str) -> Engine:
        """This engine (same judges, slots, tokenizers and store) acting for `tenant`."""
        view = copy.copy(self)
        view.tenant = tenant
        return view

    def quiet(self, tokenizers: TokenizerCache) -> Engine:
        """This engine for canary runs: `tokenizers` (the operator's, trusted), nothing
        counted into the drift window or the judging metrics."""
        view = copy.copy(self)
        view.tokenizers, view.audit, view.counted = tokenizers, None, False
        return view

    def with_slots(self, concurrency: int) -> Engine:
        """This engine with concurrency slots of its own (the in-process job worker: its
        rollouts' clocks run, so they must not queue behind synchronous traffic)."""
        view = copy.copy(self)
        view._slots = asyncio.Semaphore(concurrency)
        return view

    def judge_for(self, spec: str) -> Judge:
        """The judge for `spec`; InputError (options.judge) when the server does not allow it."""
        return self.judges.get(spec)

    async def aclose(self) -> None:
        """Close what this engine holds open (the judges' HTTP clients), after writing the
        drift audit's last chunk."""
        if self.audit is not None:
            await self.audit.aclose()
        await self.judges.aclose()

    def decode(
        self, rollout: Rollout, field: str = "", tokenizer: LoadedTokenizer | None = None
    ) -> Trace:
        """Decode a rollout's ids with its tokenizer (`tokenizer`, when the caller has it
        loaded); raises InputError naming the field (a dotted path under `field`, the
        rollout's place in the request)."""
        try:
            return self._decode(rollout, tokenizer)
        except (InputError, UnavailableError) as exc:
            raise exc.with_prefix(field) from exc

    async def load_tokenizer(self, rollout: Rollout, field: str = "") -> LoadedTokenizer | None:
        """Load the rollout's tokenizer without holding a thread of the loop's pool while
        the hub answers; None when the rollout names none (decode says so)."""
        name = rollout.tokenizer or self.settings.default_tokenizer
        if not name:
            return None
        try:
            return await self.tokenizers.aget(name)
        except (InputError, UnavailableError) as exc:
            raise exc.with_prefix(field) from exc

    def _policy_tokenizer(self, rollout: Rollout) -> LoadedTokenizer | None:
        """The rollout's tokenizer, already loaded by `decode`."""
        name = rollout.tokenizer or self.settings.default_tokenizer
        return self.tokenizers.get(name) if name else None

    def _decode(self, rollout: Rollout, tokenizer: LoadedTokenizer | None) -> Trace:
        name = rollout.tokenizer or self.settings.default_tokenizer
        if not name:
            raise InputError(
                "no tokenizer: set rollout.tokenizer or the server's JUDGE_DEFAULT_TOKENIZER",
                field="tokenizer",
            )
        limit = self.settings.max_tokens_per_rollout
        if len(rollout.response_token_ids) > limit:
            raise LimitError(
                f"{len(rollout.response_token_ids)} tokens exceed the limit of {limit} "
                "per rollout (JUDGE_MAX_TOKENS_PER_ROLLOUT)",
                field="response_token_ids",
            )
        return (tokenizer or self.tokenizers.get(name)).decode(rollout.response_token_ids)

    async def judge_one(
        self,
        rollout: Rollout,
        options: Options,
        advantage: GroupAdvantage | None = None,
        *,
        field: str = "rollout",
    ) -> Result:
        """Judge one rollout. Raises InputError for bad input (its field a path in the request
        body, the rollout at `field`); judge failures become data."""
        result, _credit = await self._judge(rollout, options, advantage, field)
        return result

    async def _judge(
        self,
        rollout: Rollout,
        options: Options,
        advantage: GroupAdvantage | None,
        field: str,
        extra: Callable[[Trace, Sequence[Span]], list[Span]] | None = None,
        using: Judge | None = None,
        alone: bool = True,
        looked: Looked | None = None,
    ) -> tuple[Result, FloatArray | None]:
        """`extra`: the judge's accepted spans as the service settles them with its own (a
        group's divergence points, made from the decoded trace); the cached judgment stays
        the judge's own, as it is for any group. `using`: the judge to run instead of the
        options' (a group session's share for this rollout). `alone`: judged outside a
        group, so a `reference_solution` gives the rollout its point here (a group's
        points already read it). `looked`: the cache as the caller read it, instead of
        reading it here (a group's members, served only as one session's set)."""
        began = time.perf_counter()
        resolved = resolve(options, self.settings)
        if resolved.kappa_mode == "relative" and advantage is None:
            raise InputError(
                "kappa_mode relative needs the rollout's group: a reward with group_id "
                "(batch, job) or group_rewards (single rollout)",
                field="options.kappa_mode",
            )
        _check_mask(rollout, field)
        judge = using or self.judge_for(resolved.judge)
        judge.check_input(rollout, field)
        if resolved.reweight is not None:
            check_rollout(resolved.reweight, rollout, field)
        tokenizer = await self.load_tokenizer(rollout, field)
        trace = await off_loop(
            len(rollout.response_token_ids),
            functools.partial(self.decode, rollout, field, tokenizer),
        )
        key = self.key_of(rollout, judge, resolved, trace)
        judgment: Judgment | None = None
        cache_state: CacheState | None = None
        if looked is not None:
            judgment, cache_state = looked.judgment, looked.state
        elif self.cache is not None:
            if resolved.use_cache:
                judgment, cache_state = await self.cache.lookup(self.tenant, key)
            else:
                cache_state = "bypass"
        lacks_transcript = judgment is not None and judgment.transcript is None
        if lacks_transcript and resolved.include_transcript:
            # Asked for what the cached judgment never kept: judge again, and keep this one.
            judgment, cache_state = None, "miss"
        hit = judgment is not None
        if judgment is None:
            judgment = await self._run_judge(rollout, trace, judge, resolved, began)
            if looked is not None:
                judgment = replace(judgment, session=looked.session)
            if self.cache is not None and cache_state == "miss":
                fresh = lacks_transcript or looked is not None  # over a partial set's
                cache_state = await self.cache.save(self.tenant, key, judgment, replace=fresh)
        if alone and extra is None:
            # Judged alone with a reference solution: the reference is a correct sibling,
            # and the rollout gets its divergence point as a group's member would.
            extra = reference_settler(rollout, resolved)
        if extra is not None and judgment.status != "failed":
            # Validating the added spans builds the trace's index: off the loop when large.
            settled = await off_loop(
                trace.num_tokens, functools.partial(extra, trace, judgment.spans)
            )
            judgment = replace(judgment, spans=settled)
        weights, reweight_diagnostics = None, None
        if resolved.reweight is not None and judgment.status != "failed":
            weights, reweight_diagnostics = await self.reweighter.weights(
                resolved.reweight,
                rollout,
                trace,
                self._policy_tokenizer(rollout),
                tenant=self.tenant,
                use_cache=resolved.use_cache and self.cache is not None,
                field=field,
            )
        result, values = await off_loop(
            trace.num_tokens,
            functools.partial(
                to_result,
                judgment,
                rollout_id=rollout.id,
                resolved=resolved,
                advantage=advantage,
                key=key,
                began=began,
                hit=hit,
                mask=rollout.response_mask,
                reweight=weights,
                reweight_diagnostics=reweight_diagnostics,
            ),
        )
        result.cache = cache_state
        if self.counted:
            metrics.observe(result, judged=not hit)
        if self.audit is not None and not hit:
            self.audit.observe(
                self.tenant,
                judge.name,
                judge.prompt_version,
                result,
                values,
                trace,
                resolved.label_scores,
            )
        return result, (None if result.status == "failed" else values)

    def key_of(self, rollout: Rollout, judge: Judge, resolved: Resolved, trace: Trace) -> str:
        """The cache key of `rollout` judged by `judge` (`resolve.cache_key`)."""
        tokenizer = rollout.tokenizer or self.settings.default_tokenizer or ""
        return cache_key(rollout, tokenizer, judge, resolved, trace.token_ids)

    async def _run_judge(
        self, rollout: Rollout, trace: Trace, judge: Judge, resolved: Resolved, began: float
    ) -> Judgment:
        final_answer = final_of(rollout, trace)
        verdict = Verdict(final_answer, rollout.reference_answer, rollout.reward)
        validator = Validator(
            trace,
            resolved.label_scores,
            resolved.span_limits,
            verdict=verdict,
            contrast=judge.contrast_check(),
        )
        # Marking and folding follow the text: a tokenizer with long pieces makes a short
        # trace in tokens a long one in characters.
        size = max(trace.num_tokens, len(trace.text) // TEXT_CHARS_PER_TOKEN)
        if judge.reads_view:
            await off_loop(size, functools.partial(_prepare, trace, validator))
        request = JudgeRequest(
            rollout_id=rollout.id,
            trace=trace,
            problem=rollout.problem,
            final_answer=final_answer,
            reward=rollout.reward,
            reference_answer=rollout.reference_answer,
            reference_solution=rollout.reference_solution,
            label_scores=resolved.label_scores,
            limits=resolved.limits,
            tokenizer=self._policy_tokenizer(rollout),
        )
        rounds = Rounds(validator)
        status: Status = "ok"
        error: str | None = None
        attempt: JudgeAttempt | None = None
        used = judge
        queued = time.perf_counter()
        async with self._slots, self.judges.using(judge):
            started = time.perf_counter()
            try:
                with metrics.session(judge.name):
                    outcome = await judge.judge(request, rounds)
            except Exception as exc:  # a judge bug must not take the batch down either
                if isinstance(exc, JudgeError):
                    boundary, error = exc.boundary, f"{exc.boundary}: {exc}"
                else:
                    log.exception("judge %s crashed on rollout %s", judge.name, rollout.id)
                    if judge.name == "rules":
                        raise
                    boundary, error = "internal", f"internal: {type(exc).__name__}: {exc}"
                partial = getattr(exc, "partial", None)
                attempt = attempt_of(
                    judge.name,
                    judge.prompt_version,
                    error,
                    partial if isinstance(partial, JudgeOutcome) else None,
                )
                metrics.judge_failed(judge.name, boundary, resolved.fallback)
                rounds = rounds.fresh()
                status = "failed" if resolved.fallback == "none" else "fallback"
                used, outcome = await self._fall_back(request, rounds, resolved)
                if isinstance(partial, JudgeOutcome):  # the log of what the attempt did
                    outcome = replace(
                        outcome, transcript=[*partial.transcript, *outcome.transcript]
                    )
        accepted, rejected = await off_loop(
            # `used`, not `judge`: a fallback's spans are claims even when the failed judge's
            # would not have been.
            size,
            functools.partial(rounds.final, outcome.spans, claims=used.carries_claims),
        )
        if outcome.scores:  # a model-internal judge's continuous scores (value:<model>)
            accepted = [replace(s, score=outcome.scores.get((s.start, s.end))) for s in accepted]
        counts: dict[str, int] = {}
        for rejection in rejected:
            counts[rejection.code] = counts.get(rejection.code, 0) + 1
        info = JudgeInfo(
            name=used.name,
            prompt_version=used.prompt_version,
            **spent(outcome),
            queue_ms=round((started - queued) * 1000),
            latency_ms=round((time.perf_counter() - started) * 1000),
            cost_usd=outcome.cost_usd,
            rejected=counts,
            attempt=attempt,
        )
        return Judgment(
            status=status,
            num_tokens=trace.num_tokens,
            info=info,
            spans=accepted,
            rejected=rejected,
            label_scores=dict(resolved.label_scores),
            error=error,
            transcript=list(outcome.transcript) if resolved.include_transcript else None,
            rollout_id=rollout.id,
            source=TraceSource.of(  # for the judgment's HTML view (view/)
                trace,
                problem=rollout.problem,
                final_answer=final_answer,
                reference_answer=rollout.reference_answer,
                reward=rollout.reward,
            ),
        )

    async def _fall_back(
        self, request: JudgeRequest, check: SpanCheck, resolved: Resolved
    ) -> tuple[Judge, JudgeOutcome]:
        if resolved.fallback == "rules":
            rules = self.judges.get("rules", by_server=True)
            return rules, await rules.judge(request, check)
        if resolved.fallback == "none":
            return NO_JUDGE, JudgeOutcome(spans=[], turns=0)
        return ZERO_JUDGE, JudgeOutcome(spans=[], turns=0)

    def check_batch_size(self, count: int) -> None:
        """A batch over JUDGE_MAX_ROLLOUTS_PER_BATCH is a 413, before any work."""
        limit = self.settings.max_rollouts_per_batch
        if count > limit:
            raise LimitError(
                f"{count} rollouts exceed the limit of {limit} per batch "
                "(JUDGE_MAX_ROLLOUTS_PER_BATCH)",
                field="rollouts",
            )

    async def judge_batch(self, rollouts: Sequence[Rollout], options: Options) -> BatchResponse:
        """Judge rollouts concurrently; one result per rollout, in order; failures are data."""
        began = time.perf_counter()
        self.check_batch_size(len(rollouts))
        advantages = credit_mod.group_advantages(
            [r.reward for r in rollouts], [r.group_id for r in rollouts]
        )
        judged = await asyncio.gather(
            *(
                self.judge_or_fail(r, options, adv, field=f"rollouts[{i}]")
                for i, (r, adv) in enumerate(zip(rollouts, advantages, strict=True))
            )
        )
        return BatchResponse(
            results=[result for result, _ in judged],
            stats=batch_stats(judged, advantages, began),
        )

    async def judge_or_fail(
        self,
        rollout: Rollout,
        options: Options,
        advantage: GroupAdvantage | None,
        *,
        field: str,
        extra: Callable[[Trace, Sequence[Span]], list[Span]] | None = None,
        using: Judge | None = None,
        alone: bool = True,
        looked: Looked | None = None,
    ) -> tuple[Result, FloatArray | None]:
        """`judge_one` with its credit array, every failure turned into a ``failed`` result
        (`extra`, `using`, `alone`, `looked`: as for `_judge`)."""
        try:
            if advantage is not None:
                advantage.check()  # an overflowing group fails before a judge is paid
            return await self._judge(
                rollout, options, advantage, field, extra, using, alone, looked
            )
        except InputError as exc:
            error = f"{exc.field}: {exc.message}"
        except UnavailableError as exc:
            error = f"unavailable: {exc.field}: {exc.message}"
        except Exception as exc:
            log.exception("rollout %s failed", rollout.id)
            error = f"internal: {type(exc).__name__}: {exc}"
        failed = Result(id=rollout.id, status="failed", error=error)
        metrics.observe(failed)
        return failed, None


def _check_mask(rollout: Rollout, field: str) -> None:
    """Before a judge is paid: a response_mask has one entry per response token."""
    mask = rollout.response_mask
    if mask is not None and len(mask) != len(rollout.response_token_ids):
        raise InputError(
            f"has {len(mask)} entries for {len(rollout.response_token_ids)} response tokens: "
            "give one 0/1 per token of response_token_ids",
            field=f"{field}.response_mask" if field else "response_mask",
        )


def _prepare(trace: Trace, validator: Validator) -> None:
    """The judge's view, and the validator's index built ahead of the judge's first check."""
    validator.prepare()
    marked_view(trace)


def batch_stats(
    judged: Sequence[tuple[Result, FloatArray | None]],
    advantages: Sequence[GroupAdvantage | None],
    began: float,
) -> BatchStats:
    credits: list[FloatArray] = []
    advs: list[GroupAdvantage | None] = []
    usage = UsageTotals()
    counts = {"ok": 0, "fallback": 0, "failed": 0}
    for (result, values), adv in zip(judged, advantages, strict=True):
        counts[result.status] += 1
        if result.judge is not None:
            add_usage(usage, result.judge)  # a failed attempt's tokens were paid for too
        if values is not None:
            credits.append(values)
            advs.append(adv)
    return BatchStats(
        judge_share=credit_mod.judge_share(credits, advs),
        usage=usage,
        counts=counts,
        latency_ms=round((time.perf_counter() - began) * 1000),
    )
