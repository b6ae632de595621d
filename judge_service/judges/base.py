"""The one async interface every judge implements.

A judge receives a `JudgeRequest` (the decoded trace, its marked view, the
problem, the final answer, the verifier's verdict and the references) and a
`SpanCheck`, the service's own span validation, which an agentic judge calls on
its submission to get rejections back for one repair turn. It returns a
`JudgeOutcome` with the raw spans it finally submits; the pipeline validates
them again, so a judge can never bypass validation. Only the rules that stop a
claim depend on the judge: a judge whose spans claim nothing (`carries_claims`
false: the service's own value differences, never an LLM's or a caller's) gets
the structural checks alone (validate.py).

A judge that cannot produce spans raises a `judge_service.errors.JudgeError`
subclass naming its boundary; the pipeline turns it into a fallback result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judge_service.spans import ValidationReport
from judge_service.trace.decode import Trace
from judge_service.trace.detokenize import LoadedTokenizer
from judge_service.trace.markers import MarkedView, marked_view

if TYPE_CHECKING:
    from judge_service.group.contrast import ContrastCheck
    from judge_service.schemas import Rollout

SpanCheck = Callable[[Sequence[Any]], ValidationReport]


@dataclass(frozen=True)
class JudgeLimits:
    max_turns: int = 12
    max_tool_calls: int = 32
    max_output_tokens: int = 200_000
    deadline_s: float = 120.0


@dataclass(frozen=True)
class JudgeRequest:
    rollout_id: str
    trace: Trace
    problem: str
    final_answer: str | None
    reward: float | None
    reference_answer: str | None
    reference_solution: str | None
    label_scores: Mapping[str, float]
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    tokenizer: LoadedTokenizer | None = None  # the policy's (model-internal judges align to it)

    @property
    def labels(self) -> list[str]:
        return list(self.label_scores)

    @property
    def view(self) -> MarkedView:
        """The trace with its ⟦n⟧ markers, built on first use and kept with the trace. The
        pipeline builds it ahead, in a worker thread, for a judge that `reads_view`."""
        return marked_view(self.trace)


@dataclass
class Usage:
    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.output_tokens + other.output_tokens,
        )


@dataclass
class JudgeOutcome:
    spans: list[Any]
    turns: int = 1
    tool_calls: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    cost_usd: float | None = None  # from the price table; None for an unpriced model
    # Continuous scores by (start, end), set only by the service's own model-internal judges
    # (value:<model>); they replace the label's score of the accepted span. A span's
    # "score" key from an LLM judge is never read: its word cannot set its own credit.
    scores: dict[tuple[int, int], float] | None = None


class Judge(ABC):
    """A span judge. `name` and `prompt_version` go into every result and its cache key."""

    name: str
    prompt_version: str
    # Whether the judge reads `JudgeRequest.view` (an LLM's prompt does; the rules judge
    # reads the text): the pipeline then marks the trace before the judge runs.
    reads_view: bool = True
    # Whether the spans are claims about the trace (an LLM's, the rules judge's), which
    # must be anchored and grounded; false only for spans the service computes itself
    # and the judge cannot word (value:<model>): their scores telescope, so dropping one
    # would falsify the sum.
    carries_claims: bool = True

    def key_material(
        self, label_scores: Mapping[str, float], limits: JudgeLimits
    ) -> dict[str, object]:
        """What of the request's labels and limits can change this judge's spans (the cache
        key). Validation sees the label names and each score's sign; a judge whose prompt
        shows the scores, or whose session the limits bound, adds them."""
        return {"labels": {label: _sign(score) for label, score in sorted(label_scores.items())}}

    def check_input(self, rollout: Rollout, field: str) -> None:  # noqa: B027 - optional hook
        """Refuse, before anything is paid, a rollout this judge cannot judge (InputError
        naming the field under `field`, the rollout's place in the request)."""

    def contrast_check(self) -> ContrastCheck | None:
        """How a span's `contrast` (a sibling's tokens as evidence) is checked; None (every
        judge but a group session's) refuses any contrast."""
        return None

    @abstractmethod
    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        """Label spans of ``request.trace``; raise a JudgeError subclass on failure."""


def _sign(score: float) -> int:
    return (score > 0) - (score < 0)
