"""The one Settings object: environment variables with prefix ``JUDGE_``."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JUDGE_", extra="ignore")

    # Judging defaults (a request's options override them within the limits below).
    default_judge: str = "rules"
    default_tokenizer: str | None = None
    default_lambda: float = 0.25
    default_kappa: float = 0.25
    default_min_confidence: float = 0.5

    # Tokenizers: which names a request may load. Unset: any hub id or local directory.
    allowed_tokenizers: Annotated[list[str] | None, NoDecode] = None
    tokenizer_cache_size: int = Field(default=8, ge=1)

    # Limits; a request beyond them gets a 4xx naming the field.
    max_tokens_per_rollout: int = Field(default=131_072, ge=1)
    max_rollouts_per_batch: int = Field(default=1024, ge=1)
    max_body_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    max_concurrency: int = Field(default=8, ge=1)

    # Stores and auth (used by later layers; unset means embedded / open).
    redis_url: str | None = None
    api_keys: Annotated[list[str] | None, NoDecode] = None

    @field_validator("allowed_tokenizers", "api_keys", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
