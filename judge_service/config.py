"""The one Settings object: environment variables with prefix ``JUDGE_``."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _per_judge(value: object) -> object:
    """A plain value (for every judge, key "*") or a JSON object keyed by judge spec,
    provider or "*" (the JUDGE_LLM_RATE_LIMITS keys)."""
    if value is None:
        return {}
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        return json.loads(text) if text.startswith("{") else {"*": text}
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JUDGE_", extra="ignore")

    # Judging defaults (a request's options override them within the limits below).
    default_judge: str = "rules"
    # Which `options.judge` a request may name: fnmatch patterns of provider:model, e.g.
    # "openai:gpt-5*,rules". Unset: the default judge and rules only.
    allowed_judges: Annotated[list[str] | None, NoDecode] = None
    judge_cache_size: int = Field(default=16, ge=1, le=1024)  # built judges kept (LRU)
    default_tokenizer: str | None = None
    default_lambda: float = 0.25
    default_kappa: float = 0.25
    default_min_confidence: float = 0.5

    # Tokenizers a request may name (judge_service/trace/loading.py): the default tokenizer,
    # names listed here exactly, hub ids matching an entry as an fnmatch pattern ("Qwen/*");
    # unset: the default tokenizer only. Local directories only under tokenizer_roots
    # (comma-separated; unset: none). The `judge` and `render` commands trust any name.
    allowed_tokenizers: Annotated[list[str] | None, NoDecode] = None
    tokenizer_roots: Annotated[list[str] | None, NoDecode] = None
    tokenizer_cache_size: int = Field(default=8, ge=1)
    # A request waits this long for a tokenizer to load, then gets a 503 while the load
    # goes on; a name that failed fails fast, with the same error, for failure_ttl_s.
    tokenizer_load_timeout_s: float = Field(default=20.0, gt=0, le=600)
    tokenizer_failure_ttl_s: float = Field(default=60.0, ge=0, le=3600)
    tokenizer_offline: bool = False  # hub ids from the local HF cache only (as HF_HUB_OFFLINE)

    # Limits; a request beyond them gets a 4xx naming the field.
    max_tokens_per_rollout: int = Field(default=131_072, ge=1)
    max_rollouts_per_batch: int = Field(default=1024, ge=1)
    # One request, parsed whole: a 1024-rollout batch of 8k-token rollouts is ~55 MB of
    # JSON ids, and parsing it costs ~7x the body in memory (a Python int per id).
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    max_concurrency: int = Field(default=8, ge=1)
    # Span validation (DESIGN "Span validation"): what a judge's submission may claim.
    max_spans: int = Field(default=256, ge=1, le=4096)  # per submission
    max_point_span_tokens: int = Field(default=512, ge=1)  # any label but region labels
    max_region_share: float = Field(default=0.5, gt=0.0, le=1.0)  # repetition, neutral

    # Model-internal credit (DESIGN "Credit methods beyond the span judge"): the models that
    # judge value:<model> and reweight cscr:/cort:<model> may name (fnmatch patterns of a hub
    # id, directory or GGUF path; unset: none), how many stay loaded per process, where
    # (unset: cuda if present, else cpu), and the longest context (prompt + response, in the
    # model's tokens) one of them scores.
    allowed_scorer_models: Annotated[list[str] | None, NoDecode] = None
    scorer_cache_size: int = Field(default=2, ge=1, le=16)
    scorer_device: str | None = None
    scorer_max_tokens: int = Field(default=16_384, ge=16)

    # Stores and auth (used by later layers; unset means embedded / open).
    redis_url: str | None = None
    api_keys: Annotated[list[str] | None, NoDecode] = None

    @property
    def judge_patterns(self) -> list[str]:
        # value:<model> judges are allowed by their model (allowed_scorer_models) as well.
        values = [f"value:{pattern}" for pattern in self.allowed_scorer_models or []]
        if self.allowed_judges is not None:
            return [*self.allowed_judges, *values]
        return [self.default_judge, "rules", *values]

    @field_validator("allowed_judges", mode="before")
    @classmethod
    def _judges_csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator(
        "allowed_tokenizers", "tokenizer_roots", "api_keys", "allowed_scorer_models", mode="before"
    )
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    # LLM judge (issue 4). Provider keys come from the SDKs' own variables
    # (ANTHROPIC_API_KEY, OPENAI_API_KEY; OPENAI_BASE_URL, ANTHROPIC_BASE_URL).
    # The global concurrency limit is max_concurrency above; these add the rest.
    llm_anthropic_base_url: str | None = None
    llm_openai_base_url: str | None = None  # vLLM / SGLang / Ollama: http://host:8000/v1
    llm_max_retries: int = Field(default=2, ge=0, le=10)  # the SDKs' retries; none on top
    llm_request_timeout_s: float = Field(default=120.0, gt=0)  # per request, within deadline_s
    llm_max_tokens_per_call: int = Field(default=4096, ge=64)
    llm_temperature: float | None = None  # unset: the provider's default
    # {"anthropic:claude-x": {"rpm": 50, "tpm": 40000}}; keys: a spec, a provider, or "*".
    # "concurrency": N holds requests beyond N in flight until one returns (a one-slot
    # llama.cpp server: 1); per process, unlike rpm/tpm, which Redis shares.
    llm_rate_limits: dict[str, dict[str, float]] = Field(default_factory=dict)
    # {"openai:my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05}} USD per Mtok.
    llm_prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    llm_cache_ttl: Literal["5m", "1h"] = "5m"  # Anthropic cache_control TTL
    llm_openai_prompt_cache_key: bool = True
    # unset: the server family's field (judges/llm/servers.py): max_completion_tokens for
    # OpenAI, max_tokens for any other base URL (llama.cpp and Ollama ignore the former).
    llm_openai_max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None
    # The OpenAI-compatible server's family, for the defaults above and build-time warnings;
    # auto: openai without a base URL or at api.openai.com, else generic.
    llm_server: Literal[
        "auto", "openai", "vllm", "sglang", "ollama", "llamacpp", "llama-cpp-python", "generic"
    ] = "auto"
    # auto | required | a tool name (forces that tool every turn). A plain value applies to
    # every judge; a JSON object is keyed like llm_rate_limits: a spec, a provider, or "*".
    llm_tool_choice: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    # low | medium | high, keyed the same way; unset: the model's default. OpenAI-compatible:
    # reasoning_effort; Anthropic: output_config.effort (no extended thinking).
    llm_reasoning_effort: Annotated[dict[str, Literal["low", "medium", "high"]], NoDecode] = Field(
        default_factory=dict
    )
    llm_max_connections: int = Field(default=256, ge=1)  # per provider and model
    llm_tool_timeout_s: float = Field(default=20.0, gt=0)
    llm_view_max_tokens: int = Field(default=400, ge=8)
    llm_max_idle_replies: int = Field(default=2, ge=1)
    llm_max_input_tokens: int | None = Field(default=None, ge=1)  # per rollout, all turns
    llm_tools: Annotated[list[str] | None, NoDecode] = None  # CSV of tool names; unset: all
    llm_prompt_version: str = "v1"
    llm_prompts_dir: str | None = None  # unset: the prompts shipped in the package
    # native: the server's tool calling; json: tools described in the prompt, one JSON
    # object per answer (servers whose tool calling is broken or absent); auto: native until
    # the server shows it cannot do tools, then json for it (judges/llm/json_mode.py).
    llm_tool_mode: Literal["native", "json", "auto"] = "native"
    # Streamed OpenAI-compatible requests, so that a request the service gave up on stops
    # at the server; auto: where the server family needs it (judges/llm/servers.py).
    llm_openai_stream: Literal["auto", "on", "off"] = "auto"
    # `judge-service judge` checks the provider once before the first rollout, each of its
    # two requests bounded by this (judges/llm/preflight.py). A closed port fails at once;
    # this is for a slow server: a CPU llama.cpp reads the ~900-token probe in 5-20 s.
    llm_preflight_timeout_s: float = Field(default=60.0, gt=0, le=600)

    @field_validator("llm_tools", mode="before")
    @classmethod
    def _llm_csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("llm_tool_choice", "llm_reasoning_effort", mode="before")
    @classmethod
    def _per_judge(cls, value: object) -> object:
        return _per_judge(value)

    @field_validator("llm_tool_choice")
    @classmethod
    def _tool_choice(cls, value: dict[str, str]) -> dict[str, str]:
        for key, choice in value.items():
            if not choice.strip() or choice == "none":
                raise ValueError(
                    f"llm_tool_choice[{key!r}] = {choice!r}: use auto, required or a tool name"
                )
        return value

    @field_validator("llm_rate_limits")
    @classmethod
    def _rate_limit_entries(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for key, entry in value.items():
            unknown = set(entry) - {"rpm", "tpm", "concurrency"}
            if unknown:
                raise ValueError(
                    f"llm_rate_limits[{key!r}]: unknown {sorted(unknown)}; "
                    "the keys are rpm, tpm, concurrency"
                )
            if any(v <= 0 for v in entry.values()):
                raise ValueError(f"llm_rate_limits[{key!r}]: every value must be positive")
            slots = entry.get("concurrency")
            if slots is not None and slots != int(slots):
                raise ValueError(f"llm_rate_limits[{key!r}]: concurrency must be a whole number")
        return value

    # Sandbox and equivalence (issue 3). Limits of the judge's run_python and
    # check_equivalence tools; the model's tool arguments never change them.
    sandbox_timeout_s: float = Field(default=5.0, gt=0, le=120)  # wall clock per run
    sandbox_memory_mb: int = Field(default=256, ge=32, le=16384)  # per run, on top of the zygote
    sandbox_pool_size: int = Field(default=2, ge=1, le=64)  # concurrent runs (warm zygotes)
    sandbox_max_output_chars: int = Field(default=16_000, ge=256)  # printed text kept per run
    # auto: use the OS layer where it can be built (else refuse sympy); require: fail without it.
    sandbox_isolation: Literal["auto", "require", "off"] = "auto"
    equivalence_timeout_s: float = Field(default=5.0, gt=0, le=120)
    equivalence_pool_size: int = Field(default=1, ge=1, le=64)

    # Serving (issue 5): the store (JUDGE_REDIS_URL above, unset: in-process), jobs,
    # workers and the per-key request limit (JUDGE_API_KEYS above, unset: open).
    redis_prefix: str = Field(default="judge", min_length=1, max_length=64)  # one per deployment
    redis_timeout_s: float = Field(default=2.0, gt=0, le=60)  # a dead Redis fails fast
    cache_ttl_s: int = Field(default=30 * 86400, ge=60)  # judged results, by cache key
    memory_cache_mb: int = Field(default=256, ge=1)  # the in-process store's result cache
    job_ttl_s: int = Field(default=7 * 86400, ge=60)  # a job and its results, after its last write
    max_rollouts_per_job: int = Field(default=100_000, ge=1)
    # A job's options.deadline_s may not exceed this. Rollouts of a worker that left no
    # heartbeat record are taken over after jobs_reclaim_idle_s, which must exceed it, so
    # that even then a live worker's slowest session is never handed to a second worker.
    jobs_max_deadline_s: float = Field(default=300.0, gt=0, le=3600)
    jobs_reclaim_idle_s: float = Field(default=600.0, gt=0)
    jobs_max_deliveries: int = Field(default=3, ge=1, le=100)  # then the dead-letter list
    # Every worker heartbeats (every dead_after/5 s); one silent this long is dead and a
    # live worker takes over its rollouts at once. The reclaim time above is then only the
    # last resort, for rollouts of a worker that left no heartbeat record at all.
    jobs_dead_after_s: float = Field(default=5.0, ge=1.0, le=600)
    worker_concurrency: int | None = Field(default=None, ge=1)  # unset: max_concurrency
    # auto: `serve` judges jobs itself unless a separate worker has a fresh heartbeat;
    # on: always; off: never (a deployment with `judge-service worker` processes).
    inprocess_worker: Literal["auto", "on", "off"] = "auto"
    api_rate_limit_rpm: float | None = Field(default=None, gt=0)  # per API key; unset: none
    api_rate_limit_burst: int | None = Field(default=None, ge=1)  # unset: 10 s of the rate

    @model_validator(mode="after")
    def _reclaim_after_deadline(self) -> Settings:
        if self.jobs_reclaim_idle_s <= self.jobs_max_deadline_s:
            raise ValueError(
                f"jobs_reclaim_idle_s ({self.jobs_reclaim_idle_s}) must exceed "
                f"jobs_max_deadline_s ({self.jobs_max_deadline_s}): a live worker's rollout "
                "would be taken over and judged twice"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
