"""Groupwise jobs (options.groupwise): one queue entry per group, never split between workers.

At submission the rollouts that share a `group_id` (two or more of them) are checked as
`/v1/judge/group` checks a group (one prompt, JUDGE_MAX_GROUP_SIZE, JUDGE_MAX_TOKENS_PER_
GROUP: a 4xx naming the rollout before the job exists). The group's first rollout is its
*leader*: only its entry is queued, and its payload lists the group's indices. The other
members' payloads are stored but not queued (`JobStore.create(members=...)`).

The worker that delivers a leader reads every member's payload, judges the group as
`/v1/judge/group` does, and writes the members' results first (each kept payload stays,
`keep_payload`) and the leader's last: the leader's entry is acknowledged only when the
whole group is written. A worker that dies before that leaves the leader's entry pending;
whoever takes it over judges the group again (results already written stand: first
write wins; judgments already cached are served from the cache). A leader that reaches
the delivery limit dead-letters the group: every member without a result gets the
leader's dead-letter result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from judge_service.errors import InputError, LimitError
from judge_service.group.judge import check_group, judging
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Result, Rollout

GROUP_KEY = "group"  # the leader payload's list of the group's indices


def groups_of(rollouts: Sequence[Rollout]) -> list[list[int]]:
    """The indices of each group_id held by two or more rollouts, in order of first index."""
    found: dict[str, list[int]] = {}
    for i, rollout in enumerate(rollouts):
        if rollout.group_id is not None:
            found.setdefault(rollout.group_id, []).append(i)
    return [indices for indices in found.values() if len(indices) > 1]


def check_groups(rollouts: Sequence[Rollout], engine: Engine) -> list[list[int]]:
    """The groups, each checked as a group (InputError/LimitError naming `rollouts[i]`)."""
    groups = groups_of(rollouts)
    for indices in groups:
        check_group([rollouts[i] for i in indices], engine, [f"rollouts[{i}]" for i in indices])
    return groups


def grouped(payloads: list[str], groups: Sequence[Sequence[int]]) -> dict[int, int]:
    """Adds the group's indices to each leader's payload (in place); member -> leader."""
    members: dict[int, int] = {}
    for indices in groups:
        leader = indices[0]
        data = json.loads(payloads[leader])
        data[GROUP_KEY] = list(indices)
        payloads[leader] = json.dumps(data, separators=(",", ":"))
        members.update({i: leader for i in indices[1:]})
    return members


async def judged_group(
    engine: Engine, stored: Sequence[str | None], indices: Sequence[int], options: Options
) -> list[Result]:
    """The results of a group from its members' stored payloads, in `indices` order. A
    group the settings now refuse (checked at submission, but a worker's settings may
    differ) fails whole, each result naming the field."""
    rollouts = [Rollout.model_validate(json.loads(p or "{}")["rollout"]) for p in stored]
    fields = [f"rollouts[{i}]" for i in indices]
    try:
        check_group(rollouts, engine, fields)
    except (InputError, LimitError) as exc:
        error = f"{exc.field}: {exc.message}"
        return [Result(id=r.id, status="failed", error=error) for r in rollouts]
    done = await judging(engine, rollouts, options, fields)
    return [result for result, _ in done.judged]
