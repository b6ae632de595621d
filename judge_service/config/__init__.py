"""The one Settings object: environment variables with prefix ``JUDGE_``.

`Settings` is made of one class per concern, each in the module named for it, so a
reader finds a setting with the code it governs; the environment names are flat
(``JUDGE_LLM_MAX_RETRIES``, not nested), and so are the keyword arguments. Every field
has a ``description``: docs/settings.md's tables are rendered from them, one table per
concern in `GROUPS`' order (`judge_service.settings_doc`; a test keeps them equal).
Where the plain default reads badly in a table, a field carries
``json_schema_extra={"default_doc": ...}``.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel
from pydantic_settings import BaseSettings, SettingsConfigDict

from judge_service.config.drift import DriftSettings
from judge_service.config.judging import (
    JudgingSettings,
    LimitSettings,
    ScorerSettings,
    TokenizerSettings,
)
from judge_service.config.llm import LLMSettings
from judge_service.config.serving import APISettings, JobSettings, SandboxSettings, StoreSettings

# (key, docs/settings.md heading, the concern's class): the order of its tables.
GROUPS: tuple[tuple[str, str, type[BaseModel]], ...] = (
    ("judging", "Judging defaults", JudgingSettings),
    ("tokenizers", "Tokenizers", TokenizerSettings),
    ("limits", "Request and span limits, concurrency", LimitSettings),
    ("scorers", "Model-internal credit", ScorerSettings),
    ("llm", "LLM judges", LLMSettings),
    (
        "sandbox",
        "Sandbox and equivalence (the `run_python` and `check_equivalence` tools)",
        SandboxSettings,
    ),
    ("store", "Store: Redis, caches, TTLs", StoreSettings),
    ("jobs", "Jobs and workers", JobSettings),
    ("api", "API keys and rate limit", APISettings),
    ("drift", "Drift audit: window, shadow, canaries", DriftSettings),
)


class Settings(
    JudgingSettings,
    TokenizerSettings,
    LimitSettings,
    ScorerSettings,
    LLMSettings,
    SandboxSettings,
    StoreSettings,
    JobSettings,
    APISettings,
    DriftSettings,
    BaseSettings,
):
    # Errors name the setting, never its value: JUDGE_REDIS_URL and the API keys hold secrets.
    model_config = SettingsConfigDict(
        env_prefix="JUDGE_", extra="ignore", hide_input_in_errors=True
    )

    @property
    def judge_patterns(self) -> list[str]:
        # value:<model> judges are allowed by their model (allowed_scorer_models) as well.
        values = [f"value:{pattern}" for pattern in self.allowed_scorer_models or []]
        if self.allowed_judges is not None:
            return [*self.allowed_judges, *values]
        return [self.default_judge, "rules", *values]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


__all__ = [
    "GROUPS",
    "APISettings",
    "DriftSettings",
    "JobSettings",
    "JudgingSettings",
    "LLMSettings",
    "LimitSettings",
    "SandboxSettings",
    "ScorerSettings",
    "Settings",
    "StoreSettings",
    "TokenizerSettings",
    "get_settings",
]
