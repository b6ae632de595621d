"""Settings of the live drift audit (judge_service/drift/): the window, the verdict's
thresholds, shadow sampling and canaries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from judge_service.config.parsing import split_csv

# The bundled canaries, found beside the package in a checkout (an installed wheel has no
# examples/: there canaries need JUDGE_DRIFT_CANARY_FILES).
_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BUNDLED_CANARIES = (_EXAMPLES / "processbench.jsonl", _EXAMPLES / "gold_spans.jsonl")
BUNDLED_TOKENIZER = _EXAMPLES / "tokenizer"


class DriftSettings(BaseModel):
    """What the service watches of its own judges while it serves."""

    drift_enabled: bool = Field(
        default=True,
        description="count every judged rollout into its judge's drift window (a few dict "
        "updates a rollout; shadow and canaries have their own settings)",
    )
    drift_window: int = Field(
        default=200,
        ge=20,
        le=100_000,
        description="judgments in the sliding window compared with the baseline; the "
        "baseline is the first this many judgments of a judge and prompt version",
    )
    drift_chunk: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="judgments a process gathers before it writes them to the store and "
        "scores the window again (the window moves by chunks)",
    )
    drift_drifting_score: float = Field(
        default=0.08,
        gt=0,
        le=1,
        description="a measure's Jensen–Shannon divergence (bits, 0–1) from the baseline at "
        "or above which the verdict is `drifting`",
    )
    drift_bad_score: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="the divergence at or above which the verdict is `bad`",
    )
    drift_rate_rise: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="the share of judge sessions that failed (fallback or failed), or of "
        "submitted spans that validation rejected, rising this far over the baseline's makes "
        "the verdict `bad` (half as far: `drifting`)",
    )
    drift_shadow_rate: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="share of judged rollouts whose spans are checked again, off the "
        "request path, against the rules judge's checker (agreement, integrity)",
    )
    drift_canary_files: Annotated[list[Path] | None, NoDecode] = Field(
        default=None,
        description="comma-separated JSONL canary files (ProcessBench and gold-span "
        "records, as `judge-service eval` reads); a malformed line is a settings error "
        "naming it",
        json_schema_extra={
            "default_doc": "`examples/processbench.jsonl,examples/gold_spans.jsonl` "
            "(bundled in a checkout)"
        },
    )
    drift_canary_tokenizer: str | None = Field(
        default=None,
        description="the tokenizer ProcessBench canaries are encoded with (and gold-span "
        "records that name none)",
        json_schema_extra={"default_doc": "`examples/tokenizer`, else JUDGE_DEFAULT_TOKENIZER"},
    )
    drift_canary_judges: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="comma-separated judge specs the canaries are run with",
        json_schema_extra={"default_doc": "the default judge"},
    )
    drift_canary_interval_s: float = Field(
        default=0,
        ge=0,
        description="run the canaries every this many seconds (0: not by time); the "
        "workers sharing a Redis run each once per period between them",
    )
    drift_canary_every: int = Field(
        default=0,
        ge=0,
        description="run the canaries every this many judgments of the judge (0: not by "
        "count), counted over every process sharing the store",
    )
    drift_canary_max_records: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description="records judged per canary run (the first ones of the files)",
    )
    drift_canary_max_cost_usd: float = Field(
        default=1.0,
        ge=0,
        description="a canary run stops judging once its priced cost reaches this",
    )
    drift_canary_f1_drop: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="a canary run whose F1 (ProcessBench, else span micro F1) falls this far "
        "under the judge's first run makes the verdict `bad` (half as far: `drifting`)",
    )

    @field_validator("drift_canary_files", "drift_canary_judges", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return split_csv(value)

    @model_validator(mode="after")
    def _checked_canaries(self) -> Self:
        if self.drift_bad_score < self.drift_drifting_score:
            raise ValueError("JUDGE_DRIFT_BAD_SCORE is below JUDGE_DRIFT_DRIFTING_SCORE")
        if self.drift_canary_files is not None or self.canaries_scheduled:
            from judge_service.errors import RecordsError
            from judge_service.evaluation.records import check_records

            for path in self.canary_files:
                try:
                    check_records(path)
                except RecordsError as exc:
                    raise ValueError(f"JUDGE_DRIFT_CANARY_FILES: {path}: {exc}") from None
        return self

    @property
    def canaries_scheduled(self) -> bool:
        return bool(self.drift_canary_interval_s or self.drift_canary_every)

    @property
    def canary_files(self) -> list[Path]:
        if self.drift_canary_files is not None:
            return list(self.drift_canary_files)
        return [path for path in BUNDLED_CANARIES if path.exists()]
