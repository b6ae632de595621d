"""A request's options resolved against the server's settings, and the cache key they give."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge_service.config import Settings
from judge_service.errors import InputError
from judge_service.judges.base import Judge, JudgeLimits
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.methods.reweight import ReweightSpec, parse_spec
from judge_service.schemas import CreditEncoding, KappaMode, Options, Rollout
from judge_service.spans import VALIDATION_VERSION, SpanLimits


@dataclass(frozen=True)
class Resolved:
    """Options with the server's defaults filled in and its limits applied."""

    judge: str
    lam: float
    kappa: float
    kappa_mode: KappaMode
    min_confidence: float
    label_scores: Mapping[str, float]
    encoding: CreditEncoding
    limits: JudgeLimits
    span_limits: SpanLimits
    use_cache: bool
    include_transcript: bool
    fallback: str
    reweight: ReweightSpec | None = None  # options.reweight with its knobs; None: w = 1


def span_limits(settings: Settings) -> SpanLimits:
    return SpanLimits(
        max_point_tokens=settings.max_point_span_tokens,
        max_region_share=settings.max_region_share,
        max_spans=settings.max_spans,
        unlock_confidence=settings.default_min_confidence,
    )


def _reweight(options: Options, settings: Settings) -> ReweightSpec | None:
    if options.reweight is None:
        if options.reweight_options is not None:
            raise InputError(
                "given without options.reweight (cscr:<model> or cort:<model>)",
                field="options.reweight_options",
            )
        return None
    return parse_spec(options.reweight, options.reweight_options, settings)


def resolve(options: Options, settings: Settings) -> Resolved:
    defaults = JudgeLimits()
    return Resolved(
        judge=options.judge or settings.default_judge,
        lam=settings.default_lambda if options.lambda_ is None else options.lambda_,
        kappa=settings.default_kappa if options.kappa is None else options.kappa,
        kappa_mode=options.kappa_mode,
        min_confidence=(
            settings.default_min_confidence
            if options.min_confidence is None
            else options.min_confidence
        ),
        label_scores=options.label_scores or dict(DEFAULT_LABEL_SCORES),
        encoding=options.credit_encoding,
        limits=JudgeLimits(
            max_turns=options.max_turns or defaults.max_turns,
            max_tool_calls=(
                defaults.max_tool_calls
                if options.max_tool_calls is None
                else options.max_tool_calls
            ),
            deadline_s=options.deadline_s or defaults.deadline_s,
        ),
        span_limits=span_limits(settings),
        use_cache=options.use_cache,
        include_transcript=options.include_transcript,
        fallback=options.fallback,
        reweight=_reweight(options, settings),
    )


def cache_key(
    rollout: Rollout,
    tokenizer: str,
    judge: Judge,
    resolved: Resolved,
    token_ids: npt.NDArray[np.int64] | None = None,
) -> str:
    """Content address of a judgment: what the judge saw, which judge (spec, prompt version,
    what its prompt shows of the labels, its limits) and the validation limits. The credit
    knobs (λ, κ, kappa_mode, min_confidence, encoding) are not in it: they are applied to
    the cached judgment per request. `token_ids`: the rollout's ids as the decode already
    made them an array (the same bytes; a 32k-token list converted again cost ~1.5 ms)."""
    if token_ids is None:
        token_ids = np.asarray(rollout.response_token_ids, np.int64)
    ids = np.ascontiguousarray(token_ids, np.int64).tobytes()
    material = {
        "ids": hashlib.sha256(ids).hexdigest(),
        "tokenizer": tokenizer,
        "problem": rollout.problem,
        "final_answer": rollout.final_answer,
        "reference_answer": rollout.reference_answer,
        "reference_solution": rollout.reference_solution,
        "reward": rollout.reward,
        "judge": resolved.judge,
        "judge_name": judge.name,
        "prompt_version": judge.prompt_version,
        "judge_inputs": judge.key_material(resolved.label_scores, resolved.limits),
        "span_limits": resolved.span_limits.key(),
        "validation": VALIDATION_VERSION,
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()
