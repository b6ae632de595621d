"""Settings of the LLM judges: providers, tools, prompts, rate limits
(judge_service/judges/llm/)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from judge_service.config.parsing import per_judge, split_csv


class LLMSettings(BaseModel):
    """LLM judges. Provider keys come from the SDKs' own variables (ANTHROPIC_API_KEY,
    OPENAI_API_KEY); the global concurrency limit is max_concurrency (LimitSettings)."""

    # rpm / tpm are token buckets that Redis shares between processes; concurrency counts
    # this process's requests in flight.
    llm_rate_limits: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description='JSON, per `provider:model`, per provider or `"*"`: '
        '`{"anthropic": {"rpm": 50, "tpm": 40000}}`. A limiter belongs to the entry that '
        "applies, so every model under a provider-wide entry shares one quota (rotating model "
        'names cannot multiply it). `"concurrency": N` holds requests beyond N in flight (per '
        "process) until one returns, within the rollout's deadline: "
        '`{"openai": {"concurrency": 1}}` for a one-slot llama.cpp server',
    )
    # Validated below: "none" would leave the judge unable to submit.
    llm_tool_choice: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="`auto`, `required` or a tool name (forced every turn; llama-cpp-python "
        "returns tool calls only for a named tool, e.g. `submit_spans`); a plain value or JSON "
        "keyed like the rate limits. A name that is not one of the judge's tools is a settings "
        "error",
        json_schema_extra={"default_doc": "`auto`"},
    )
    llm_reasoning_effort: Annotated[dict[str, Literal["low", "medium", "high"]], NoDecode] = Field(
        default_factory=dict,
        description="`low`, `medium` or `high`, keyed the same way: OpenAI-compatible "
        "`reasoning_effort`; Anthropic `output_config.effort` (no extended thinking)",
        json_schema_extra={"default_doc": "unset"},
    )
    llm_server: Literal[
        "auto", "openai", "vllm", "sglang", "ollama", "llamacpp", "llama-cpp-python", "generic"
    ] = Field(
        default="auto",
        description="the OpenAI-compatible server's family: `openai`, `vllm`, `sglang`, "
        "`ollama`, `llamacpp`, `llama-cpp-python`, `generic` (`auto`: `openai` without a base "
        "URL or at api.openai.com, else `generic`); sets the max-tokens field and warns about "
        "settings the family ignores",
    )
    # The field's name differs by server: llama.cpp and Ollama ignore max_completion_tokens.
    llm_openai_max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = Field(
        default=None,
        description="`max_completion_tokens` or `max_tokens`; unset: the server family's",
        json_schema_extra={"default_doc": "by server"},
    )
    # Nothing retries on top of the SDKs: the two would multiply.
    llm_max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="the SDKs' retries (429, 5xx, timeouts; `retry-after` honoured); nothing "
        "retries on top, and a context-length 400 is never retried",
    )
    llm_request_timeout_s: float = Field(
        default=120.0, gt=0, description="one request, never past the rollout's deadline"
    )
    llm_max_tokens_per_call: int = Field(
        default=4096, ge=64, description="output tokens per model call"
    )
    llm_max_input_tokens: int | None = Field(
        default=None,
        ge=1,
        description="input tokens (all turns) per rollout before the session stops",
    )
    llm_temperature: float | None = Field(
        default=None, description="the provider's default when unset"
    )
    llm_prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="JSON, USD per million tokens: "
        '`{"openai:m": {"input": 1, "output": 4, "cache_read": 0.25}}`; unpriced models '
        "report no cost",
        json_schema_extra={"default_doc": "built-in list prices"},
    )
    llm_anthropic_base_url: str | None = Field(
        default=None,
        description="endpoint override (`ANTHROPIC_BASE_URL` also works)",
        json_schema_extra={"default_doc": "SDK default"},
    )
    llm_openai_base_url: str | None = Field(
        default=None,
        description="endpoint override (`OPENAI_BASE_URL` also works); a self-hosted server: "
        "`http://host:8000/v1`",
        json_schema_extra={"default_doc": "SDK default"},
    )
    llm_max_connections: int = Field(
        default=256, ge=1, description="HTTP connections per provider and model"
    )
    llm_cache_ttl: Literal["5m", "1h"] = Field(
        default="5m",
        description="Anthropic's prompt cache TTL (`cache_control`): `1h` selects the one-hour "
        "cache (writes cost 2x)",
    )
    llm_openai_prompt_cache_key: bool = Field(
        default=True,
        description="send OpenAI's `prompt_cache_key` (naming the rollout's prefix) so that a "
        "rollout's turns reach the same cache",
    )
    llm_tools: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="comma-separated subset of "
        "`view_tokens,search_trace,run_python,check_equivalence`",
        json_schema_extra={"default_doc": "all available"},
    )
    llm_tool_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="one tool call; a timeout goes back to the model as the tool's result",
    )
    llm_view_max_tokens: int = Field(default=400, ge=8, description="tokens per `view_tokens` call")
    llm_max_idle_replies: int = Field(
        default=2,
        ge=1,
        description="consecutive answers without a tool call before the session gives up",
    )
    llm_prompt_version: str = Field(
        default="v1",
        description="directory under `prompts/` (or `JUDGE_LLM_PROMPTS_DIR`): "
        "`v1`, or `v2` (worked boundary example, a complete `submit_spans` example, anchoring "
        "rules, confidence anchors)",
    )
    llm_prompts_dir: str | None = Field(
        default=None,
        description="a directory of prompt versions used instead of the package's",
        json_schema_extra={"default_doc": "the prompts shipped in the package"},
    )
    # Streaming is what makes llama-cpp-python stop generating for a request the service
    # gave up on; other families stop when the client goes (judges/llm/servers.py).
    llm_openai_stream: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="`on`: streamed Chat Completions (usage from the last chunk, or counted "
        "per chunk where a server sends none); `auto`: where the server family keeps "
        "generating a plain request after the client has gone (llama-cpp-python)",
    )
    # json exists for servers whose tool calling is broken or absent; auto switches an
    # endpoint only once it has shown that (judges/llm/json_mode.py).
    llm_tool_mode: Literal["native", "json", "auto"] = Field(
        default="native",
        description="`native`, `json` (tools described in the prompt, one JSON object per "
        'answer) or `auto` (see "Self-hosted judge model")',
    )
    # A closed port fails at once; the bound is for a slow server: a CPU llama.cpp reads the
    # ~900-token probe in 5-20 s (judges/llm/preflight.py).
    llm_preflight_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="each of the pre-flight's two requests (`judge-service judge`, `eval`)",
    )

    @field_validator("llm_tools", mode="before")
    @classmethod
    def _llm_csv(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("llm_tool_choice", "llm_reasoning_effort", mode="before")
    @classmethod
    def _per_judge(cls, value: object) -> object:
        return per_judge(value)

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
