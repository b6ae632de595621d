"""The group read by one LLM judge: the prompt (problem once, verdicts, the group's view,
the divergence hints), the tools, the check, and `MemberJudge` per rollout for the
pipeline (`group.session`).

The hints are the checker's divergence points (`group.divergence`), shown as facts the
judge may argue with: the service adds each point to its rollout's credit anyway, and a
judge's non-negative span over it stands only with a contrast to a correct sibling making
the same step (`group.judge`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from judge_service.errors import JudgeError
from judge_service.group.contrast import contrast_check
from judge_service.group.divergence import Divergence
from judge_service.group.session import (
    GroupCheck,
    MemberJudge,
    Reading,
    SharedSession,
    group_limits,
    group_tools,
    group_version,
)
from judge_service.group.tools import GroupContext
from judge_service.group.view import Shared, group_view
from judge_service.judges.base import JudgeOutcome, JudgeRequest
from judge_service.judges.cache import JudgeCache
from judge_service.judges.llm.conversation import Prompt
from judge_service.judges.llm.llm_judge import LLMJudge, tool_spec
from judge_service.judges.llm.loop import ToolLoop
from judge_service.judges.llm.prompt import fence_id
from judge_service.judges.llm.transcript import Transcript
from judge_service.resolve import Resolved
from judge_service.schemas import Rollout
from judge_service.trace import Trace
from judge_service.trace.markers import escape_view_text
from judge_service.validate import Validator, Verdict

_REASONS = {
    "checker_false": "the service's checker finds a computation in it false",
    "leads_to_wrong_answer": "what follows it ends in the rollout's wrong final answer",
}


@dataclass(frozen=True)
class Shown:
    """A rollout of the group the judge reads (copies of another are not shown)."""

    rollout: Rollout
    trace: Trace
    final_answer: str | None
    correct: bool | None


def hints_text(points: Sequence[Divergence]) -> str:
    if not points:
        return "None: no wrong rollout shares its first steps with a correct sibling."
    lines = []
    for p in points:
        lines.append(
            f"- Rollout {p.rollout} (wrong) makes the same first {p.agreed} step(s) as correct "
            f"rollout {p.sibling}, then parts at ⟦{p.rollout}.{p.start}⟧ to "
            f"⟦{p.rollout}.{p.end}⟧: {_REASONS[p.reason]}. The service labels that step "
            f"{p.label}."
        )
    return "\n".join(lines)


def _verdicts(shown: Mapping[int, Shown]) -> str:
    lines = []
    for r, s in sorted(shown.items()):
        reward = s.rollout.reward
        verdict = "no verdict" if reward is None else f"reward {reward:g}"
        verdict += "" if s.correct is None else (", correct" if s.correct else ", wrong")
        answer = "(none found)" if s.final_answer is None else escape_view_text(s.final_answer)
        lines.append(f"- Rollout {r}: {verdict}; final answer: {answer[:200]}")
    return "\n".join(lines)


def group_key(shown: Mapping[int, Shown], hints: str) -> str:
    """What the session saw of the group, hashed: every shown rollout's ids, tokenizer,
    reward and answers, and the hints."""
    digest = hashlib.sha256(hints.encode("utf-8", "surrogatepass"))
    for r, s in sorted(shown.items()):
        # The ids as the decode made them an array: hashing their bytes, not their JSON,
        # keeps a 512k-token group's key to milliseconds on the event loop.
        fields = s.rollout.model_dump_json(exclude={"id", "metadata", "response_token_ids"})
        digest.update(f"\0{r}\0{fields}\0".encode("utf-8", "surrogatepass"))
        digest.update(np.ascontiguousarray(s.trace.token_ids, np.int64).tobytes())
    return digest.hexdigest()


class GroupReader:
    """Builds the one session of a group and the `MemberJudge` of each shown rollout."""

    def __init__(
        self,
        judge: LLMJudge,
        judges: JudgeCache,
        shown: Mapping[int, Shown],
        points: Sequence[Divergence],
        resolved: Resolved,
    ) -> None:
        self.judge, self.judges = judge, judges
        self.shown = dict(sorted(shown.items()))
        self.resolved = resolved
        self.traces = {r: s.trace for r, s in self.shown.items()}
        self.hints = hints_text(points)
        self.tools = group_tools(judge, list(resolved.label_scores), len(self.shown))
        self.version = group_version(judge, self.tools)
        self.key = group_key(self.shown, self.hints)
        self.session = SharedSession(self._run)

    def member(self, index: int, same_as: Mapping[int, int]) -> MemberJudge:
        order = list(self.shown)
        return MemberJudge(
            self.judge,
            self.session,
            index=index,
            position=order.index(index),
            parts=len(order),
            version=self.version,
            group_key=self.key,
            contrast=contrast_check(self.traces, index, same_as),
        )

    def prompt(self, shared: Shared) -> Prompt:
        first = next(iter(self.shown.values())).rollout
        limits = group_limits(self.resolved.limits, len(self.shown))
        references = ""
        if first.reference_answer is not None:
            references += f"\n# Reference answer\n{first.reference_answer}\n"
        if first.reference_solution is not None:
            references += f"\n# Reference solution\n{first.reference_solution}\n"
        view = group_view(self.traces, shared)
        prompts = self.judge.prompts
        context = prompts.render(
            "group_context",
            problem=first.problem or "(not given)",
            references=references,
            num_rollouts=len(self.shown),
            verdicts=_verdicts(self.shown),
            fence=fence_id(view),
            group=view,
            hints=self.hints,
            max_turns=limits.max_turns,
            max_tool_calls=limits.max_tool_calls,
            deadline_s=f"{limits.deadline_s:g}",
        )
        system = prompts.system_text(self.resolved.label_scores)
        specs = tuple(tool_spec(t) for t in self.tools.values())
        digest = hashlib.sha256("\0".join((self.version, system, context)).encode()).hexdigest()
        return Prompt(system, context, specs, cache_key=f"judge-group-{digest[:32]}")

    async def _run(self) -> Reading:
        resolved = self.resolved
        validators = {
            r: Validator(
                s.trace,
                resolved.label_scores,
                resolved.span_limits,
                verdict=Verdict(s.final_answer, s.rollout.reference_answer, s.rollout.reward),
                contrast=contrast_check(self.traces, r),
            )
            for r, s in self.shown.items()
        }
        # Comparing prefixes and marking every rollout is work on the group's tokens (up to
        # JUDGE_MAX_TOKENS_PER_GROUP): off the event loop.
        shared = await asyncio.to_thread(Shared.of, self.traces)
        prompt = await asyncio.to_thread(self.prompt, shared)
        check = GroupCheck(validators, shared)
        first = next(iter(self.shown.values()))
        request = JudgeRequest(
            rollout_id=f"group of {first.rollout.id}",
            trace=first.trace,
            problem=first.rollout.problem,
            final_answer=first.final_answer,
            reward=first.rollout.reward,
            reference_answer=first.rollout.reference_answer,
            reference_solution=first.rollout.reference_solution,
            label_scores=resolved.label_scores,
            limits=group_limits(resolved.limits, len(self.shown)),
        )
        context = GroupContext(request.rollout_id, first.trace, traces=self.traces)
        transcript = Transcript()
        transcript.prompt(prompt, judge=self.judge.name, prompt_version=self.version)
        loop = self.judge.loop
        if loop.config.max_input_tokens is not None:  # a budget per rollout: G of them
            config = replace(
                loop.config, max_input_tokens=loop.config.max_input_tokens * len(self.shown)
            )
            loop = ToolLoop(loop.provider, loop.prompts, config)
        async with self.judges.using(self.judge):
            try:
                outcome = await loop.run(
                    request, prompt, self.tools, check, transcript, context=context
                )
            except JudgeError as exc:
                if isinstance(exc.partial, JudgeOutcome):
                    raise exc.with_partial(self.judge.priced(exc.partial)) from exc.__cause__
                raise
        return Reading(self.judge.priced(outcome), check.rounds)
