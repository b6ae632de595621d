"""Settings of judging itself: defaults, tokenizers, request limits, scorer models.

Validators have names unique across all the concerns' classes: `Settings` inherits from
every one of them, and pydantic keeps one validator per name."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from judge_service.config.parsing import split_csv


class JudgingSettings(BaseModel):
    """What a request gets when its options say nothing, and which judges it may name."""

    default_judge: str = Field(
        default="rules",
        description="the judge a request gets when `options.judge` names none: `rules`, "
        "`anthropic:<model>`, `openai:<model>` or `value:<model>`",
    )
    # Unset admits only the default judge and rules, so that a caller cannot pick models
    # billed to the operator's key.
    allowed_judges: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="comma-separated fnmatch patterns of `provider:model` a request may name "
        "in `options.judge` (`openai:gpt-5*,rules`); anything else is a 422 naming "
        "`options.judge`, before any client is built: a caller cannot pick models on the "
        "operator's key",
        json_schema_extra={"default_doc": "the default judge and `rules`"},
    )
    judge_cache_size: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="judges (provider clients) kept built, least recently used evicted; an "
        "evicted judge is closed once no rollout uses it, and all are closed at shutdown",
    )
    default_lambda: float = Field(
        default=0.25, description="λ, the credit scale, for a request without `options.lambda`"
    )
    default_kappa: float = Field(
        default=0.25, description="κ, the credit cap, for a request without `options.kappa`"
    )
    default_min_confidence: float = Field(
        default=0.5,
        description="spans less confident than this give no credit, for a request without "
        "`options.min_confidence`; an `invalid` below it unlocks no `verified_correction` or "
        "`unsupported` (`no_prior_invalid`)",
    )

    @field_validator("allowed_judges", mode="before")
    @classmethod
    def _judges_csv(cls, value: object) -> object:
        return split_csv(value)


class TokenizerSettings(BaseModel):
    """Which tokenizers a request may name, and how they are loaded and kept
    (judge_service/trace/loading.py). The `judge` and `render` commands are the operator's
    own and trust any name."""

    default_tokenizer: str | None = Field(
        default=None,
        description="the tokenizer (hub id or directory) of a rollout that names none; unset: "
        "such a rollout is a 422",
    )
    allowed_tokenizers: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="tokenizers a request may name besides the default: comma-separated exact "
        "names or fnmatch patterns of hub ids (`Qwen/*`); anything else is a 422 naming "
        "`tokenizer` before the hub is asked",
        json_schema_extra={"default_doc": "unset (the default tokenizer only)"},
    )
    tokenizer_roots: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="comma-separated directories under which a request may name a local "
        "tokenizer directory (`..` and symlinks are resolved first)",
        json_schema_extra={"default_doc": "unset (none)"},
    )
    tokenizer_cache_size: int = Field(
        default=8, ge=1, description="tokenizers kept loaded per process (LRU)"
    )
    tokenizer_load_timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="the longest a request waits for a tokenizer to load, then a 503 with "
        "`retry-after` while the load goes on",
    )
    # Remembered, a failed name stops reaching the hub on every request.
    tokenizer_failure_ttl_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="a name that failed to load fails at once, with the same error, this long "
        "(0: never remembered)",
    )
    tokenizer_offline: bool = Field(
        default=False,
        description="hub ids from the local Hugging Face cache only, never asking the hub (as "
        "`HF_HUB_OFFLINE=1`)",
    )

    @field_validator("allowed_tokenizers", "tokenizer_roots", mode="before")
    @classmethod
    def _tokenizer_csv(cls, value: object) -> object:
        return split_csv(value)


class LimitSettings(BaseModel):
    """Bounds on a request, checked before any work: beyond them a 4xx naming the field."""

    max_concurrency: int = Field(
        default=8,
        ge=1,
        description="rollouts judged at once in this process (the global limit)",
    )
    max_tokens_per_rollout: int = Field(
        default=131_072, ge=1, description="`response_token_ids` per rollout"
    )
    max_rollouts_per_batch: int = Field(
        default=1024, ge=1, description="rollouts per `/v1/judge/batch` request"
    )
    max_group_size: int = Field(
        default=16, ge=2, le=256, description="rollouts per `/v1/judge/group` request (G)"
    )
    max_tokens_per_group: int = Field(
        default=524_288,
        ge=1,
        description="`response_token_ids` over all the rollouts of one group",
    )
    # One request, parsed whole: a 1024-rollout batch of 8k-token rollouts is ~55 MB of
    # JSON ids, and parsing it costs ~7x the body in memory (a Python int per id).
    max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="one request body, enforced as it streams (413); 64 MiB holds a "
        "1024-rollout batch of 8k-token rollouts and costs ~450 MB to parse",
        json_schema_extra={"default_doc": "67108864 (64 MiB)"},
    )
    # Span validation (docs/design.md "Span validation"): what a judge's submission may claim.
    max_spans: int = Field(
        default=256,
        ge=1,
        le=4096,
        description="spans per submission (`too_many_spans`), and per `/v1/credit` call (413)",
    )
    max_point_span_tokens: int = Field(
        default=512,
        ge=1,
        description="the longest span of a point label, i.e. any label but "
        "`unproductive_repetition` and `neutral`; over half the trace it must also be one "
        "line (`span_too_long`)",
    )
    max_region_share: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="the largest share of the trace the `unproductive_repetition` and `neutral` "
        "spans of one submission may cover together (`span_too_long`)",
    )


class ScorerSettings(BaseModel):
    """Model-internal credit (docs/auditing.md "Model-internal credit"): the
    models that value:<model> and reweight cscr:/cort:<model> may name, and where they run."""

    allowed_scorer_models: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="comma-separated fnmatch patterns of the models (hub id, directory, GGUF "
        'path) that `options.judge: "value:<model>"` and `options.reweight: "cscr:<model>" / '
        '"cort:<model>"` may name; anything else is a 422 naming that option, before anything '
        "is loaded. A matching `value:` judge needs no entry in `JUDGE_ALLOWED_JUDGES`",
        json_schema_extra={"default_doc": "unset (none)"},
    )
    scorer_cache_size: int = Field(
        default=2,
        ge=1,
        le=16,
        description="those models kept loaded per process (LRU); each is loaded once, in a "
        "thread, by the first request that needs it",
    )
    scorer_device: str | None = Field(
        default=None,
        description="where they run (GPU bf16, CPU fp32)",
        json_schema_extra={"default_doc": "`cuda` if present, else `cpu`"},
    )
    scorer_max_tokens: int = Field(
        default=16_384,
        ge=16,
        description="the longest context (prompt + response, in the model's tokens) one of "
        "them scores; beyond it a 413 naming the rollout's `response_token_ids`",
    )

    @field_validator("allowed_scorer_models", mode="before")
    @classmethod
    def _scorer_csv(cls, value: object) -> object:
        return split_csv(value)
