"""POW3R: policy-aware criterion weights for rubric rewards (``POST /v1/rubric/weights``).

A group's rollouts (all answers to one prompt, from the current policy) are scored
per criterion, s[i, k]; humans gave the criteria weights h[k] and, optionally,
categories. A criterion every rollout meets equally (or fails equally) carries no
signal for the group's advantages; one on which they differ does. So, with h
normalised to sum 1 and H[c] = Σ_{k in c} h[k] (the human weight of category c)::

    σ[k]  = std_i s[i, k]                              (how much k separates the group)
    σ̄[c]  = Σ_{k in c} h[k] σ[k] / H[c]                (the category's human-weighted mean)
    e[k]  = h[k] · σ[k] / σ̄[c]                         (h[k] where σ̄[c] = 0)
    w[k]  = (1 - emphasis) · h[k] + emphasis · e[k]
    r[i]  = Σ_k w[k] s[i, k]

Σ_{k in c} e[k] = H[c], so every category keeps its human weight exactly (category
balance) and w sums to 1; within a category, criteria that separate the group
equally keep their human ratios, and one that separates more gains weight at the
others' expense. ``emphasis`` 0 gives the human weights back. Scores should share
one scale (say 0..1): σ compares criteria.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from judge_service.bounds import Finite, Id, ShortText

MAX_CRITERIA = 64
MAX_GROUP = 1024


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: ShortText = Field(min_length=1)
    weight: float = Field(ge=0.0, le=1e6, description="The human weight (any scale, >= 0).")
    category: ShortText | None = Field(
        default=None, description="Criteria of one category share its human weight."
    )


class Pow3rOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    emphasis: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="How far weight moves toward separating criteria (0: the human weights).",
    )


class RubricWeightsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    criteria: list[Criterion] = Field(min_length=1, max_length=MAX_CRITERIA)
    scores: list[list[Finite]] = Field(
        min_length=1,
        max_length=MAX_GROUP,
        description="One row per rollout of the group, one score per criterion, in order.",
    )
    rollout_ids: list[Id] | None = Field(default=None, max_length=MAX_GROUP)
    options: Pow3rOptions = Field(default_factory=Pow3rOptions)

    @field_validator("criteria")
    @classmethod
    def _usable(cls, value: list[Criterion]) -> list[Criterion]:
        names = [c.name for c in value]
        if len(set(names)) != len(names):
            raise ValueError("criterion names must be unique")
        if sum(c.weight for c in value) <= 0:
            raise ValueError("at least one criterion needs a positive weight")
        return value

    @field_validator("scores")
    @classmethod
    def _rectangular(cls, value: list[list[float]], info: ValidationInfo) -> list[list[float]]:
        criteria = info.data.get("criteria")
        if criteria is not None:
            for i, row in enumerate(value):
                if len(row) != len(criteria):
                    raise ValueError(f"row {i} has {len(row)} scores for {len(criteria)} criteria")
        if any(abs(x) > 1e6 for row in value for x in row):
            raise ValueError("scores must be within ±1e6")
        return value

    @field_validator("rollout_ids")
    @classmethod
    def _one_per_row(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        scores = info.data.get("scores")
        if value is not None and scores is not None and len(value) != len(scores):
            raise ValueError(f"{len(value)} ids for {len(scores)} rows of scores")
        return value


class CriterionWeight(BaseModel):
    name: str
    category: str | None = None
    human_weight: float = Field(description="The human weight, normalised to sum 1.")
    weight: float = Field(description="The policy-aware weight (sums to 1).")
    separation: float = Field(description="The std of the criterion's scores over the group.")


class RubricWeightsResponse(BaseModel):
    criteria: list[CriterionWeight]
    rewards: list[float] = Field(description="Per rollout: Σ_k weight[k]·score[k].")
    human_rewards: list[float] = Field(description="Per rollout, with the human weights.")
    rollout_ids: list[str] | None = None


def criterion_weights(
    scores: Any, human: Any, categories: list[str | None] | None = None, emphasis: float = 0.5
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """(w, σ) for scores (N, K), human weights (K,) and categories (K; None: one category)."""
    s = np.asarray(scores, np.float64)
    h = np.asarray(human, np.float64)
    h = h / h.sum()
    sigma = s.std(axis=0)
    groups = categories or [None] * h.shape[0]
    emphasised = h.copy()
    for category in set(groups):
        members = np.asarray([g == category for g in groups])
        total = float(h[members].sum())
        mean_sigma = float((h[members] * sigma[members]).sum()) / total if total > 0 else 0.0
        if mean_sigma > 0:
            emphasised[members] = h[members] * sigma[members] / mean_sigma
    w = (1.0 - emphasis) * h + emphasis * emphasised
    return w, sigma


def rubric_weights(body: RubricWeightsRequest) -> RubricWeightsResponse:
    categories = [c.category for c in body.criteria]
    human = np.asarray([c.weight for c in body.criteria], np.float64)
    w, sigma = criterion_weights(body.scores, human, categories, body.options.emphasis)
    s = np.asarray(body.scores, np.float64)
    h = human / human.sum()
    return RubricWeightsResponse(
        criteria=[
            CriterionWeight(
                name=c.name,
                category=c.category,
                human_weight=float(h[k]),
                weight=float(w[k]),
                separation=float(sigma[k]),
            )
            for k, c in enumerate(body.criteria)
        ],
        rewards=[float(x) for x in s @ w],
        human_rewards=[float(x) for x in s @ h],
        rollout_ids=body.rollout_ids,
    )
