"""One GRPO group judged together (``POST /v1/judge/group``).

The group is checked whole before any judge is paid: one prompt (the same `problem` and
`reference_answer`), at most JUDGE_MAX_GROUP_SIZE rollouts and JUDGE_MAX_TOKENS_PER_GROUP
tokens, one `group_id` if any. Then:

1. identical rollouts (token ids, tokenizer, reward) are judged once (`same_as`);
2. every rollout is decoded and the group's divergence points found (`divergence`: the
   checker's, no LLM); a rollout that cannot be decoded fails alone, as in a batch;
3. each rollout is judged as `/v1/judge/batch` judges it, with Dr. GRPO advantages over
   the group. An LLM judge reads the whole group in one session instead
   (`group.reading`: problem once, ⟦r.n⟧ markers, shared prefixes once, the divergence
   points as hints); the pipeline still validates, caches and credits each rollout;
4. each divergence point is added to its rollout's accepted spans (`_settler`): a
   judge's non-negative span over the step stands only with a contrast citing a correct
   sibling that makes the same step (`group.contrast`); without one it gives way to the
   point, so it is credited with the same λ and κ;
5. in an equal-reward group (the outcome advantage is 0 for every token) the rollouts
   are ranked by their judged credit per token and given zero-sum relative scores
   (`scores`); g·λ times each is added to every token of its rollout, g the one group
   factor that keeps every rollout within κ (`scores.score_credits`).

`batch.py` applies this to each group of a batch (options.groupwise).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judge_service import credit as credit_mod
from judge_service.credit import FloatArray, GroupAdvantage
from judge_service.errors import InputError, LimitError
from judge_service.group.cached import one_session
from judge_service.group.divergence import Divergence, Member, divergences
from judge_service.group.reading import GroupReader, Shown
from judge_service.group.scores import preferences_of_ranking, relative_scores, score_credits
from judge_service.group.settle import final_of, settler
from judge_service.judges.llm.llm_judge import LLMJudge
from judge_service.offload import off_loop
from judge_service.pipeline import Engine, batch_stats
from judge_service.resolve import Resolved, resolve
from judge_service.schemas import (
    DivergencePoint,
    GroupBlock,
    GroupResponse,
    Options,
    Result,
    Rollout,
)

Judged = tuple[Result, FloatArray | None]


def check_group(rollouts: Sequence[Rollout], engine: Engine, fields: Sequence[str]) -> None:
    """Bad input, before anything is decoded or paid: LimitError (413) over a limit,
    InputError (422) naming the first rollout that is not of the group's prompt
    (`fields[i]`: where rollout i sits in the request)."""
    settings = engine.settings
    if len(rollouts) > settings.max_group_size:
        raise LimitError(
            f"{len(rollouts)} rollouts exceed the limit of {settings.max_group_size} per "
            "group (JUDGE_MAX_GROUP_SIZE)",
            field="rollouts",
        )
    tokens = sum(len(r.response_token_ids) for r in rollouts)
    if tokens > settings.max_tokens_per_group:
        raise LimitError(
            f"{tokens} tokens over the group exceed the limit of "
            f"{settings.max_tokens_per_group} (JUDGE_MAX_TOKENS_PER_GROUP)",
            field="rollouts",
        )
    first = rollouts[0]
    for i, rollout in enumerate(rollouts[1:], start=1):
        for name in ("problem", "reference_answer", "group_id"):
            if getattr(rollout, name) != getattr(first, name):
                raise InputError(
                    f"differs from {fields[0]}.{name}: a group is the rollouts of one "
                    "prompt (judge different prompts with /v1/judge/batch)",
                    field=f"{fields[i]}.{name}",
                )


def copies(rollouts: Sequence[Rollout]) -> list[int | None]:
    """For each rollout, the index of the first earlier one it is identical to: every
    field the judgment reads (ids, tokenizer, reward, answers, mask, rubric) equal; only
    the id and the metadata may differ."""
    first: dict[str, int] = {}
    out: list[int | None] = []
    for i, r in enumerate(rollouts):
        content = r.model_dump_json(exclude={"id", "metadata"}).encode()
        key = hashlib.sha256(content).hexdigest()
        out.append(first.get(key))
        first.setdefault(key, i)
    return out


@dataclass
class Judging:
    """A group judged: each rollout's result and credit, its advantage, the group block."""

    judged: list[Judged]
    advantages: list[GroupAdvantage | None]
    block: GroupBlock


async def judge_group(
    engine: Engine, rollouts: Sequence[Rollout], options: Options
) -> GroupResponse:
    """The group's results, in order (a failing rollout is a ``failed`` result), and its
    group block. Raises InputError/LimitError for a bad group (see `check_group`)."""
    began = time.perf_counter()
    if not rollouts:
        raise InputError("a group needs rollouts", field="rollouts")
    fields = [f"rollouts[{i}]" for i in range(len(rollouts))]
    check_group(rollouts, engine, fields)
    done = await judging(engine, rollouts, options, fields)
    return GroupResponse(
        results=[r for r, _ in done.judged],
        stats=batch_stats(done.judged, done.advantages, began),
        group=done.block,
    )


async def judging(
    engine: Engine, rollouts: Sequence[Rollout], options: Options, fields: Sequence[str]
) -> Judging:
    """Judge a group already checked (`check_group`); `fields[i]` is where rollout i sits
    in the request, for its errors."""
    resolved = resolve(options, engine.settings)
    same_as = copies(rollouts)
    members = [
        None if same_as[i] is not None else await _member(engine, r, fields[i])
        for i, r in enumerate(rollouts)
    ]
    tokens = sum(len(r.response_token_ids) for r in rollouts)
    references = list(dict.fromkeys(r.reference_solution for r in rollouts if r.reference_solution))
    points = await off_loop(tokens, functools.partial(divergences, members, references))
    by_rollout = {p.rollout: p for p in points}
    advantages = credit_mod.group_advantages(
        [r.reward for r in rollouts], ["group"] * len(rollouts), [f"{f}.reward" for f in fields]
    )
    reader = _reader(engine, rollouts, members, points, resolved)
    sources = {i: s for i, s in enumerate(same_as) if s is not None}
    # One session's judgments or none: a partial or mixed cached set is judged afresh.
    looked = await one_session(engine, reader, rollouts, resolved, sources) if reader else {}

    async def judge(i: int) -> Judged:
        point = by_rollout.get(i)
        extra = None if point is None else settler(point, rollouts[i], resolved, members)
        using = reader.member(i, sources) if reader and i in reader.shown else None
        return await engine.judge_or_fail(
            rollouts[i],
            options,
            advantages[i],
            field=fields[i],
            extra=extra,
            using=using,
            alone=False,  # the group's points read its reference solutions already
            looked=looked.get(i),
        )

    unique = [i for i, s in enumerate(same_as) if s is None]
    done = dict(zip(unique, await asyncio.gather(*(judge(i) for i in unique)), strict=True))
    judged: list[Judged] = []
    for i, source in enumerate(same_as):
        result, values = done[i if source is None else source]
        if source is not None:
            result = result.model_copy(update={"id": rollouts[i].id})
        judged.append((result, values))
    rewards = [r.reward for r in rollouts]
    equal = None not in rewards and len(set(rewards)) == 1
    ranked = None
    # Under relative κ the budget is κ times the group's mean |A|, 0 here: no credit.
    if equal and resolved.kappa_mode == "absolute":
        ranked = _rank(judged, resolved.lam, resolved.kappa, resolved.encoding, rollouts)
    block = GroupBlock(
        size=len(rollouts),
        correct=[_verdict(same_as, members, i) for i in range(len(rollouts))],
        same_as=same_as,
        divergence=[_point(p, judged[p.rollout][0]) for p in points],
        equal_reward=equal,
        ranking=None if ranked is None else ranked[0],
        scores=None if ranked is None else ranked[1],
        score_factor=None if ranked is None else ranked[2],
    )
    return Judging(judged, advantages, block)


def _reader(
    engine: Engine,
    rollouts: Sequence[Rollout],
    members: Sequence[Member | None],
    points: Sequence[Divergence],
    resolved: Resolved,
) -> GroupReader | None:
    """One session for the group when the judge is an LLM and two or more distinct
    rollouts decode; otherwise each rollout is judged alone."""
    try:
        judge = engine.judge_for(resolved.judge)
    except InputError:  # each rollout's judging reports it, as in a batch
        return None
    shown = {
        i: Shown(rollouts[i], m.trace, final_of(rollouts[i], m.trace), m.correct)
        for i, m in enumerate(members)
        if m is not None
    }
    if not isinstance(judge, LLMJudge) or len(shown) < 2:
        return None
    return GroupReader(judge, engine.judges, shown, points, resolved)


async def _member(engine: Engine, rollout: Rollout, field: str) -> Member | None:
    try:
        tokenizer = await engine.load_tokenizer(rollout, field)
        trace = await off_loop(
            len(rollout.response_token_ids),
            functools.partial(engine.decode, rollout, field, tokenizer),
        )
    except Exception:  # the rollout's own judging reports it, once, as a failed result
        return None
    return Member(
        trace, rollout.final_answer, rollout.reference_answer, rollout.reward, rollout.problem
    )


def _verdict(
    same_as: Sequence[int | None], members: Sequence[Member | None], i: int
) -> bool | None:
    source = same_as[i]
    member = members[i if source is None else source]
    return None if member is None else member.correct


def _point(point: Divergence, result: Result) -> DivergencePoint:
    span = point.span()
    applied = result.status != "failed" and any(
        (s.start, s.end, s.label) == (span.start, span.end, span.label) for s in result.spans
    )
    return DivergencePoint(
        rollout=point.rollout,
        sibling=point.sibling,
        agreed_steps=point.agreed,
        start=point.start,
        end=point.end,
        reason=point.reason,
        label=span.label,
        applied=applied,
    )


def _rank(
    judged: list[Judged],
    lam: float,
    kappa: float,
    encoding: credit_mod.Encoding,
    rollouts: Sequence[Rollout],
) -> tuple[list[list[int]], list[float], float] | None:
    """Equal rewards: tiers by judged credit per token (best first), their zero-sum
    scores, and each rollout's credit and advantage with g·λ·score added (in place; g the
    one group factor that keeps every rollout within κ: `scores.score_credits`). Rollouts
    without credit (failed) are left out and score 0."""
    scored = [i for i, (_, values) in enumerate(judged) if values is not None and values.size]
    if len(scored) < 2:
        return None
    means = {i: round(float(np.asarray(judged[i][1]).mean()), 9) for i in scored}
    tiers = [
        [i for i in scored if means[i] == level]
        for level in sorted(set(means.values()), reverse=True)
    ]
    local = {i: k for k, i in enumerate(scored)}
    ranked = [[local[i] for i in tier] for tier in tiers]
    subset = relative_scores(len(scored), preferences_of_ranking(len(scored), ranked))
    credits = [np.asarray(judged[i][1], np.float64) for i in scored]
    masks = [
        None if rollouts[i].response_mask is None
        else np.asarray(rollouts[i].response_mask, np.float64)
        for i in scored
    ]  # fmt: skip
    totals, factor = score_credits(credits, subset, lam=lam, kappa=kappa, masks=masks)
    scores = [0.0] * len(judged)
    for i, score, total in zip(scored, subset, totals, strict=True):
        scores[i] = score
        result = judged[i][0]
        result.credit = credit_mod.encode(total, encoding)
        if result.advantage is not None:  # A_i is 0 in an equal-reward group
            result.advantage = credit_mod.encode(total, encoding)
        judged[i] = (result, total)
    return tiers, scores, factor
