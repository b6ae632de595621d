"""The wire format of docs/design.md as pydantic models (requests, options, results)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judge_service_client.bounds import (
    MAX_LABELS,
    MAX_METADATA_CHARS,
    MAX_METADATA_DEPTH,
    MAX_SPANS_CEILING,
    Finite,
    Id,
    Label,
    Metadata,
    Name,
    ShortText,
    SpanLabel,
    Text,
)
from judge_service_client.labels import DEFAULT_LABEL_SCORES

CreditEncoding = Literal["dense", "spans", "base64-f32"]
KappaMode = Literal["absolute", "relative"]
Status = Literal["ok", "fallback", "failed"]


class Rollout(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: Id
    group_id: ShortText | None = None
    problem: Text = ""
    response_token_ids: list[int] = Field(
        description="The sampled response ids, never re-tokenized."
    )
    tokenizer: Name | None = Field(
        default=None, description="Hub id or local directory; else JUDGE_DEFAULT_TOKENIZER."
    )
    reward: Finite | None = Field(
        default=None, description="The verifier's verdict / outcome reward (finite)."
    )
    final_answer: Text | None = Field(
        default=None, description="Missing: the content of the last \\boxed{...}."
    )
    reference_answer: Text | None = None
    reference_solution: Text | None = Field(
        default=None,
        description="A correct solution of the problem (a dataset's, e.g. GSM8K's). Shown "
        "to an LLM judge, and read as one more correct sibling: a wrong rollout gets a "
        "divergence point against it, judged alone or in a group.",
    )
    rubric: Text | None = Field(
        default=None,
        description="Grading criteria for this rollout; read by options.reweight cort:<model>.",
    )
    response_mask: list[Literal[0, 1]] | None = Field(
        default=None,
        description="0/1 per response token (as many as response_token_ids): 1 where the "
        "policy sampled the token, 0 for tool output and environment text. The judge sees "
        "every token; credit and advantage are 0 where the mask is 0.",
    )
    metadata: Metadata = Field(
        default_factory=dict,
        description=f"Kept with the rollout, never judged: at most {MAX_METADATA_CHARS} "
        f"characters of JSON, nested at most {MAX_METADATA_DEPTH} deep.",
    )


class ReweightOptions(BaseModel):
    """Knobs of options.reweight's weight map (methods/weights.py); unset: the method's default."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(
        default=None, ge=0.01, le=100.0, description="Of the map exp(signal / temperature)."
    )
    min_weight: float | None = Field(default=None, ge=0.0, le=1.0, description="Lower bound of w.")
    max_weight: float | None = Field(default=None, ge=1.0, le=100.0, description="Upper bound.")
    strength: float | None = Field(
        default=None, ge=0.0, le=1.0, description="w = 1 + strength·(bounded map - 1)."
    )
    condition: Literal["verdict", "mean"] | None = Field(
        default=None,
        description="CSCR: s[t] = |log p(t | outcome asserted) - log p(t | plain prompt)| for "
        "the assertion agreeing with the reward (verdict, default; no reward: the mean), or "
        "the mean of both (mean). CoRT ignores it.",
    )


class ReweightDiagnostics(BaseModel):
    """CSCR's correct-vs-incorrect contrast over the masked tokens (not w's signal)."""

    condition: Literal["verdict", "mean"]
    condition_used: Literal["correct", "incorrect", "mean"]
    sign_reversal_share: float | None = Field(
        description="Among tokens whose two shifts both exceed 1e-3 nats (compared_tokens), "
        "the share where they have opposite signs; null when there are none."
    )
    compared_tokens: int
    mean_abs_shift_correct: float = Field(description="Mean |log p_correct - log p_plain|.")
    mean_abs_shift_incorrect: float
    mean_abs_difference: float = Field(description="Mean |log p_correct - log p_incorrect|.")


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    judge: Name | None = Field(
        default=None,
        description="rules | anthropic:<model> | openai:<model> | value:<model> (the model's "
        "value of the reference answer at each line; a model in JUDGE_ALLOWED_SCORER_MODELS)",
    )
    reweight: Name | None = Field(
        default=None,
        description="cscr:<model> | cort:<model>: per-token weights w[t] with advantage[t] = "
        "A_i·w[t] + credit[t]; w >= 0, bounded, mean 1 over the masked tokens. Unset: w = 1.",
    )
    reweight_options: ReweightOptions | None = None
    lambda_: float | None = Field(default=None, alias="lambda", ge=0.0, le=10.0)
    kappa: float | None = Field(default=None, ge=0.0, le=10.0)
    kappa_mode: KappaMode = Field(
        default="absolute",
        description="absolute: mean |credit| <= kappa; relative: <= kappa x the group's mean "
        "|advantage| (needs the rollout's group and reward).",
    )
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    label_scores: dict[Label, float] | None = Field(
        default=None,
        max_length=MAX_LABELS,
        description=f"Scores by label, merged over the defaults; at most {MAX_LABELS} entries.",
    )
    credit_encoding: CreditEncoding = "dense"
    max_turns: int | None = Field(default=None, ge=1, le=64)
    max_tool_calls: int | None = Field(default=None, ge=0, le=256)
    deadline_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    use_cache: bool = True
    include_transcript: bool = False
    groupwise: bool = Field(
        default=False,
        description="/v1/judge/batch, jobs and judge-service judge: judge the rollouts that "
        "share a group_id as one group, as /v1/judge/group does (a batch's group blocks "
        "come back in `groups`; a job queues one entry per group, its blocks in its "
        "results pages' `groups`); /v1/judge (one rollout) refuses it (422).",
    )
    fallback: Literal["rules", "zero", "none"] = Field(
        default="rules",
        description="What a failed LLM judge falls back to: rules (the rules judge's spans), "
        "zero (no spans: zero credit), none (no fallback: the result is failed, with no "
        "credit, and names the error).",
    )

    @field_validator("label_scores")
    @classmethod
    def _known_or_finite(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is None:
            return None
        merged = dict(DEFAULT_LABEL_SCORES)
        for label, score in value.items():
            if not label or len(label) > 64:
                raise ValueError(f"label {label!r} must be 1..64 characters")
            if not -10.0 <= score <= 10.0:
                raise ValueError(f"score of {label!r} must be within [-10, 10]")
            merged[label] = score
        return merged


class ContrastOut(BaseModel):
    """A sibling's tokens a group session's judge cited as evidence, checked."""

    rollout: int = Field(description="The sibling's index in the group.")
    start: int
    end: int


class SpanOut(BaseModel):
    start: int
    end: int
    label: str
    score: float
    confidence: float
    evidence: str
    evidence_end: str | None = None
    contrast: ContrastOut | None = Field(
        default=None, description="Group judging only: the sibling's tokens cited, checked."
    )


class RejectedSpan(BaseModel):
    span: dict[str, Any]
    code: str = Field(description="Machine-readable: evidence_not_anchored, overlap, flood, ...")
    reason: str
    round: int = Field(default=1, description="1: the first submission; 2: the repair.")


class JudgeUsage(BaseModel):
    """What one judge session spent: model turns, tool calls, tokens by kind."""

    turns: int = 0
    tool_calls: dict[str, int] = Field(default_factory=dict)
    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0


class JudgeAttempt(JudgeUsage):
    """The judge that was asked and failed (a fallback, or a failed result without one)."""

    name: str = Field(description="The judge spec that was tried, e.g. openai:<model>.")
    prompt_version: str | None = None
    cost_usd: float | None = Field(
        default=None, description="What the attempt cost (price table); None when unpriced."
    )
    error: str = Field(description="Why it failed: the boundary, then the message.")


class JudgeInfo(JudgeUsage):
    name: str = Field(
        description="The judge that produced the spans: on a fallback rules or zero, on a "
        "failed result none; `attempt` is then the judge that failed."
    )
    prompt_version: str
    queue_ms: int = Field(
        default=0,
        description="Time the rollout waited for a concurrency slot (JUDGE_MAX_CONCURRENCY) "
        "before judging began; not part of latency_ms.",
    )
    latency_ms: int = Field(
        default=0,
        description="Judging time only: from holding a slot to the validated spans (the "
        "failed attempt and the fallback included); the queue, decoding and credit are not "
        "in it. On a cache hit: the time to answer from the cache.",
    )
    cost_usd: float | None = None
    rejected: dict[str, int] = Field(
        default_factory=dict,
        description="Rejected spans by code, every round (the first submission's too).",
    )
    attempt: JudgeAttempt | None = Field(
        default=None,
        description="Set when the requested judge failed: that attempt (name, usage, turns, "
        "cost, error), kept apart from the judge whose spans were used. Its usage is counted "
        "in the batch's usage totals.",
    )


class CreditRun(BaseModel):
    start: int
    end: int
    value: float


PerToken = list[float] | list[CreditRun] | str


class Result(BaseModel):
    id: str
    status: Status
    num_tokens: int = 0
    spans: list[SpanOut] = Field(default_factory=list)
    rejected_spans: list[RejectedSpan] = Field(default_factory=list)
    credit: PerToken | None = None
    credit_scale: float = 1.0
    advantage: PerToken | None = None
    weights: PerToken | None = Field(
        default=None, description="w[t] of options.reweight (absent without one)."
    )
    reweight_diagnostics: ReweightDiagnostics | None = Field(
        default=None, description="With options.reweight cscr:<model>, over the masked tokens."
    )
    judge: JudgeInfo | None = None
    cache_key: str | None = None
    error: str | None = None
    transcript: list[dict[str, Any]] | None = None
    cache: Literal["hit", "miss", "bypass", "unavailable"] | None = Field(
        default=None,
        description="The judgment cache: hit (reused, no judge tokens spent), miss (judged), "
        "bypass (options.use_cache false), unavailable (the store is down: judged without it).",
    )


class JudgeRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rollout: Rollout
    options: Options = Field(default_factory=Options)
    group_rewards: list[Finite] | None = Field(
        default=None,
        description="Rewards of the rollout's whole group (its own included): "
        "advantage = reward - mean(group_rewards).",
    )


class BatchRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rollouts: list[Rollout] = Field(min_length=1)
    options: Options = Field(default_factory=Options)


class UsageTotals(BaseModel):
    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class BatchStats(BaseModel):
    judge_share: float | None = Field(
        default=None,  # the API leaves out None fields: a batch with no credit has none
        description="Σ|credit| / (Σ_i T_i·|A_i| + Σ|credit|) over the batch.",
    )
    usage: UsageTotals
    counts: dict[str, int]
    latency_ms: int


class GroupRequestBody(BaseModel):
    """The G rollouts of one prompt (GRPO, RLOO, DAPO groups), judged together."""

    rollouts: list[Rollout] = Field(
        min_length=2,
        description="One prompt's rollouts: the same `problem` and `reference_answer`; "
        "at most JUDGE_MAX_GROUP_SIZE (default 16).",
    )
    options: Options = Field(default_factory=Options)


class DivergencePoint(BaseModel):
    rollout: int = Field(description="The wrong rollout's index in the group.")
    sibling: int = Field(
        description="The first correct sibling read against it; -1 when the only correct "
        "solution was the rollouts' reference_solution."
    )
    agreed_steps: int = Field(
        description="The wrong rollout's steps before the point (each one its alignment "
        "with the correct solutions found good)."
    )
    start: int = Field(description="The point's tokens in the wrong rollout: [start, end).")
    end: int
    reason: Literal["checker_false", "leads_to_wrong_answer"]
    label: str = Field(description="The label its span carries (invalid).")
    applied: bool = Field(
        description="Whether its span is in the rollout's credit: false where the judge's "
        "own accepted span covers the step, or the rollout failed."
    )


class GroupBlock(BaseModel):
    size: int
    correct: list[bool | None] = Field(
        description="Per rollout: the reward's verdict (reward > 0), else the answer "
        "against the reference; null when neither decides."
    )
    same_as: list[int | None] = Field(
        description="Per rollout: the index of an earlier identical rollout (every field "
        "but id and metadata equal) whose judgment it shares, judged once; null for the "
        "first."
    )
    divergence: list[DivergencePoint] = Field(default_factory=list)
    equal_reward: bool = Field(
        description="Every rollout has the same reward: the outcome advantage is 0 for all."
    )
    ranking: list[list[int]] | None = Field(
        default=None,
        description="Equal-reward groups: tiers best first, by the judged credit per token.",
    )
    scores: list[float] | None = Field(
        default=None,
        description="Equal-reward groups: relative scores in [-1, 1] summing to 0; "
        "score_factor times lambda times each is added to every token of its rollout.",
    )
    score_factor: float | None = Field(
        default=None,
        description="g in [0, 1]: the one factor of the group's score credit that keeps "
        "every rollout's mean |credit| within kappa (1 when the cap does not bind).",
    )


class BatchResponse(BaseModel):
    results: list[Result]
    stats: BatchStats
    groups: dict[str, GroupBlock] | None = Field(
        default=None,
        description="With options.groupwise: each judged group's block by its group_id "
        "(its indices are within the group, in batch order).",
    )


class GroupResponse(BaseModel):
    results: list[Result]
    stats: BatchStats
    group: GroupBlock


class SpanIn(BaseModel):
    start: int
    end: int
    label: SpanLabel
    confidence: float = 1.0
    evidence: Text = ""
    evidence_end: Text | None = None


class CreditRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_tokens: int = Field(ge=0, description="T, the number of response tokens.")
    spans: list[SpanIn] = Field(
        description=f"At most JUDGE_MAX_SPANS (default 256, never above {MAX_SPANS_CEILING})."
    )
    options: Options = Field(default_factory=Options)
    reward: Finite | None = None
    group_rewards: list[Finite] | None = None

    @field_validator("spans", mode="before")
    @classmethod
    def _few_enough(cls, value: Any) -> Any:
        # Before the items are parsed, so 100,000 spans cost a len(), not 100,000 models;
        # the route then applies the server's own JUDGE_MAX_SPANS.
        if isinstance(value, list) and len(value) > MAX_SPANS_CEILING:
            raise ValueError(
                f"{len(value)} spans exceed the limit of {MAX_SPANS_CEILING} per call "
                "(JUDGE_MAX_SPANS)"
            )
        return value


class CreditResponse(BaseModel):
    credit: PerToken
    credit_scale: float
    advantage: PerToken | None = None
    rejected_spans: list[RejectedSpan] = Field(default_factory=list)


class ErrorBody(BaseModel):
    detail: str
    field: str | None = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorBody, "description": "A size limit was exceeded; `field` names it."},
    422: {"model": ErrorBody, "description": "Invalid input; `field` names the offending field."},
    503: {
        "model": ErrorBody,
        "description": "Temporarily unavailable on the server's side (e.g. the tokenizer hub "
        "is unreachable); retry after the `retry-after` header's seconds.",
    },
}


# Jobs (issue 5): durable asynchronous judging of many rollouts.
JobState = Literal["queued", "running", "done", "failed", "cancelled"]


class JobRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rollouts: list[Rollout] = Field(min_length=1)
    options: Options = Field(default_factory=Options)
    idempotency_key: Id | None = Field(
        default=None,
        description="Resubmitting with the same key (and the same body) returns the same job.",
    )


class JobCreated(BaseModel):
    id: str
    status: JobState


class JobCounts(BaseModel):
    total: int
    queued: int
    running: int
    done: int = Field(description="Judged: results with status ok or fallback.")
    failed: int = Field(description="Results with status failed (dead letters included).")
    cancelled: int
    dead_lettered: int = Field(description="Gave up after JUDGE_JOBS_MAX_DELIVERIES deliveries.")


class JobView(BaseModel):
    id: str
    status: JobState
    counts: JobCounts
    created_at: float
    finished_at: float | None = None


class JobResultsPage(BaseModel):
    results: list[Result] = Field(
        description="The next results in input order; stops at the first rollout not yet judged."
    )
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null once every result was returned."
    )
    groups: dict[str, GroupBlock] | None = Field(
        default=None,
        description="With options.groupwise: the block of each group whose first rollout is "
        "on this page, by group_id (its indices are within the group, in job order); none "
        "for a group refused by its worker, cancelled or dead-lettered. Absent otherwise.",
    )
