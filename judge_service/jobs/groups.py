"""Groupwise jobs (options.groupwise): one queue entry per group, never split between workers.

At submission the rollouts that share a `group_id` (two or more of them) are checked as
`/v1/judge/group` checks a group (one prompt, JUDGE_MAX_GROUP_SIZE, JUDGE_MAX_TOKENS_PER_
GROUP: a 4xx naming the rollout before the job exists). The group's first rollout is its
*leader*: only its entry is queued, and its payload lists the group's indices. The other
members' payloads are stored but not queued (`JobStore.create(members=...)`).

Beginning the leader's entry marks the whole group running under the worker's name and
makes it the group's *holder* (a cancel leaves the group to it; workers claim a group by
the judging slots its members hold, `jobs.claims`). The worker reads every member's
payload and judges the group as `/v1/judge/group` does. It writes the results
*provisionally* (`JobStore.write_members`: hidden from pages and counts, written only
while it holds the group, each tagged with its writer; on Redis in transactions of a
bounded size, a long result in parts, `jobs.parts`), then commits the group in one atomic
step that copies no result: every result counted, the group's block and the entry's
acknowledgement (`JobStore.finish_group`, which checks that it still holds the group and
wrote every result). A page stops at the first rollout without a result and the leader is
the group's first, so no page ever shows part of a group. A worker that dies before the
commit leaves the entry pending and nothing of the group committed; whoever takes it over
begins the group again and judges it whole, its writes replacing the earlier provisional
results (and dropping their parts). Its judgments all come from one session: the cached
ones only when every member's is cached from one session, else all afresh
(`group.cached`). One that was only paused past its
lease and comes back writes and commits nothing, nor releases the taker's entry: every
result of a group comes from one judging. A leader that reaches the delivery limit
dead-letters the group whole.

The block is kept as a *group record*, `{"group_id", "block"}`, by the leader's index: a
results page carries the blocks of the groups whose leader is on it (`groups`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

from judge_service.errors import InputError, LimitError
from judge_service.jobs.model import Entry, FinishKind, GroupWrite, JobStore, until_ok
from judge_service.pipeline import Engine
from judge_service.schemas import GroupBlock, Options, Result, Rollout
from judge_service.wire_json import dump_json_str

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
    # The group judge (its LLM session, tools, contrast: ~50 ms to import) loads where a
    # group is judged or checked, not with this module: the job service and worker import
    # it, and a server's start does not wait for it (its warm-up thread imports it: heap.py).
    from judge_service.group.judge import check_group

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


def group_indices(payload: str | None) -> list[int] | None:
    """The group's indices when `payload` is a leader's, else None."""
    indices = json.loads(payload).get(GROUP_KEY) if payload else None
    return [int(i) for i in indices] if isinstance(indices, list) else None


async def judged_group(
    engine: Engine, stored: Sequence[str | None], indices: Sequence[int], options: Options
) -> tuple[list[tuple[int, str, FinishKind]], str | None]:
    """A group judged from its members' stored payloads: each result to write, in
    `indices` order, and the group record (None when the group was not judged). A group
    the settings now refuse (checked at submission, but a worker's settings may differ)
    fails whole, each result naming the field."""
    from judge_service.group.judge import check_group, judging  # (check_groups says why)

    rollouts = [Rollout.model_validate(json.loads(p or "{}")["rollout"]) for p in stored]
    fields = [f"rollouts[{i}]" for i in indices]
    try:
        check_group(rollouts, engine, fields)
    except (InputError, LimitError) as exc:
        error = f"{exc.field}: {exc.message}"
        failed = [Result(id=r.id, status="failed", error=error) for r in rollouts]
        return writes(indices, failed), None
    done = await judging(engine, rollouts, options, fields)
    results = [result for result, _ in done.judged]
    return writes(indices, results), group_record(rollouts[0].group_id or "", done.block)


def writes(indices: Sequence[int], results: Sequence[Result]) -> list[tuple[int, str, FinishKind]]:
    out: list[tuple[int, str, FinishKind]] = []
    for index, result in zip(indices, results, strict=True):
        kind: FinishKind = "failed" if result.status == "failed" else "done"
        out.append((index, dump_json_str(result), kind))
    return out


async def deliver_group(
    jobs: JobStore,
    engine: Engine,
    consumer: str,
    entry: Entry,
    indices: Sequence[int],
    options: Options,
) -> int:
    """A worker's delivery of a leader's entry: judge its whole group, write its members'
    results provisionally (bounded calls), then commit the group whole with the
    leader's result and acknowledgement. How many rollouts it judged."""
    stored = await until_ok(lambda: jobs.payloads(entry.job, indices))
    if any(p is None for p in stored):  # the job ended (cancelled, expired) meanwhile
        await until_ok(lambda: jobs.ack(entry))
        return 0
    results, record = await judged_group(engine, stored, indices, options)
    members = [(i, data) for i, data, _ in results]
    written = await until_ok(functools.partial(jobs.write_members, entry, consumer, members))
    if written < 0:  # the job is gone
        await until_ok(lambda: jobs.ack(entry))
    if written <= 0:  # or the group is not this worker's any more: leave it to its holder
        return len(results)
    commit: list[GroupWrite] = [(i, None, kind) for i, _, kind in results]
    await until_ok(lambda: jobs.finish_group(entry, commit, record, holder=consumer))
    return len(results)


async def group_of(jobs: JobStore, entry: Entry, options: Options) -> list[int] | None:
    """The group's indices when the entry is a leader's, from its stored payload (read only
    for a groupwise job, on the paths that have no payload in hand: cancel, dead-letter)."""
    if not options.groupwise:
        return None
    stored = await until_ok(lambda: jobs.payloads(entry.job, [entry.index]))
    return group_indices(stored[0] if stored else None)


def group_record(group_id: str, block: GroupBlock) -> str:
    return '{"group_id":' + json.dumps(group_id) + ',"block":' + dump_json_str(block) + "}"


def groups_json(records: Sequence[str]) -> str:
    """A results page's `groups` object from group records, in their order."""
    parts = []
    for record in records:
        data = json.loads(record)
        block = json.dumps(data["block"], separators=(",", ":"))
        parts.append(json.dumps(data["group_id"]) + ":" + block)
    return "{" + ",".join(parts) + "}"
