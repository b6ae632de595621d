"""The jobs API's logic: check and submit a job, read its status and results, cancel it.

Checks that need no judging happen before anything is written (sizes, options,
tokenizer names), so a bad job is a 4xx naming the field and nothing else;
rollouts that fail later (an id outside the vocabulary) get a ``failed``
result like in a batch. A job is visible only to the tenant that created it:
any other tenant gets the same 404 as for a job that never existed.
"""

from __future__ import annotations

import hashlib
import json

from judge_service import credit as credit_mod
from judge_service.config import Settings
from judge_service.errors import (
    ConflictError,
    IdempotencyConflict,
    InputError,
    LimitError,
    NotFoundError,
)
from judge_service.jobs.groups import check_groups, grouped, groups_json
from judge_service.jobs.model import CANCELLED, JobRecord, JobStore, cancelled_result
from judge_service.judges.base import JudgeLimits
from judge_service.pipeline import Engine
from judge_service.schemas import JobRequestBody, JobView, Options

MAX_PAGE = 1000


class JobService:
    def __init__(self, jobs: JobStore, engine: Engine, settings: Settings) -> None:
        self.jobs = jobs
        self.engine = engine
        self.settings = settings

    async def submit(self, tenant: str, body: JobRequestBody) -> tuple[str, bool]:
        """(job id, created); an earlier job when the idempotency key is known."""
        options = await self._checked(body)
        advantages = credit_mod.group_advantages(
            [r.reward for r in body.rollouts], [r.group_id for r in body.rollouts]
        )
        options_json = options.model_dump_json(by_alias=True, exclude_none=True)
        payloads = [
            f'{{"advantage":{_advantage_json(adv)},"rollout":{rollout.model_dump_json()}}}'
            for rollout, adv in zip(body.rollouts, advantages, strict=True)
        ]
        members = None
        if options.groupwise:  # one queue entry per group (jobs/groups.py)
            members = grouped(payloads, check_groups(body.rollouts, self.engine))
        digest = hashlib.sha256(options_json.encode())
        for payload in payloads:
            digest.update(b"\n" + payload.encode())
        try:
            return await self.jobs.create(
                tenant,
                body.idempotency_key,
                digest.hexdigest(),
                options_json,
                [r.id for r in body.rollouts],
                payloads,
                members,
            )
        except IdempotencyConflict as exc:
            raise ConflictError(
                f"already used for job {exc.job_id} with a different request body",
                field="idempotency_key",
            ) from exc

    async def _checked(self, body: JobRequestBody) -> Options:
        settings = self.settings
        if len(body.rollouts) > settings.max_rollouts_per_job:
            raise LimitError(
                f"{len(body.rollouts)} rollouts exceed the limit of "
                f"{settings.max_rollouts_per_job} per job (JUDGE_MAX_ROLLOUTS_PER_JOB)",
                field="rollouts",
            )
        tokenizers: dict[str, str] = {}
        for i, rollout in enumerate(body.rollouts):
            field = f"rollouts[{i}]"
            name = rollout.tokenizer or settings.default_tokenizer
            if not name:
                raise InputError(
                    "no tokenizer: set it or the server's JUDGE_DEFAULT_TOKENIZER",
                    field=f"{field}.tokenizer",
                )
            tokenizers.setdefault(name, f"{field}.tokenizer")
            if len(rollout.response_token_ids) > settings.max_tokens_per_rollout:
                raise LimitError(
                    f"{len(rollout.response_token_ids)} tokens exceed the limit of "
                    f"{settings.max_tokens_per_rollout} per rollout (JUDGE_MAX_TOKENS_PER_ROLLOUT)",
                    field=f"{field}.response_token_ids",
                )
        for name, field in tokenizers.items():  # load now: a wrong name fails the request
            await self.engine.tokenizers.aget(name, field)
        options = body.options
        self.engine.judge_for(options.judge or settings.default_judge)
        limit = settings.jobs_max_deadline_s
        if options.deadline_s is not None and options.deadline_s > limit:
            raise InputError(
                f"{options.deadline_s} s exceeds the longest deadline a job may have, "
                f"{limit} s (JUDGE_JOBS_MAX_DEADLINE_S)",
                field="options.deadline_s",
            )
        if options.deadline_s is None:
            # Pin the deadline the workers will use, so it can never outlast the reclaim time.
            default = min(JudgeLimits().deadline_s, limit)
            options = options.model_copy(update={"deadline_s": default})
        return options

    async def record(self, tenant: str, job_id: str) -> JobRecord:
        record = await self.jobs.get(job_id)
        if record is None or record.tenant != tenant:
            raise NotFoundError(f"no job {job_id!r}", field="id")
        return record

    async def view(self, tenant: str, job_id: str) -> JobView:
        return (await self.record(tenant, job_id)).view()

    async def cancel(self, tenant: str, job_id: str) -> JobView:
        await self.record(tenant, job_id)
        await self.jobs.cancel(job_id)
        return await self.view(tenant, job_id)

    async def results_page(self, tenant: str, job_id: str, cursor: str | None, limit: int) -> str:
        """A `JobResultsPage` as JSON, built from the stored result JSON without re-parsing:
        results in input order from `cursor`, up to the first rollout not judged yet; with
        options.groupwise, the blocks of the groups whose first rollout is among them."""
        record = await self.record(tenant, job_id)
        start = 0
        if cursor is not None:
            if not cursor.isdigit() or int(cursor) > record.total:
                raise InputError(f"not a cursor of this job: {cursor!r}", field="cursor")
            start = int(cursor)
        stored = await self.jobs.result_slice(job_id, start, min(limit, record.total - start))
        ready: list[str] = []
        for value in stored:
            if value is None:
                break
            ready.append(value)
        if CANCELLED in ready:
            ids = await self.jobs.ids(job_id, start, start + len(ready))
            ready = [
                cancelled_result(ids[k]).model_dump_json(exclude_none=True)
                if value == CANCELLED
                else value
                for k, value in enumerate(ready)
            ]
        end = start + len(ready)
        next_cursor = None if end >= record.total else str(end)
        page = '{"results":[' + ",".join(ready) + '],"next_cursor":' + json.dumps(next_cursor)
        if json.loads(record.options).get("groupwise"):
            # A group's record is written with its leader's result, the group's first: so
            # a page shows the block of every group whose leader it shows.
            page += ',"groups":' + groups_json(await self.jobs.group_records(job_id, start, end))
        return page + "}"


def _advantage_json(advantage: credit_mod.GroupAdvantage | None) -> str:
    if advantage is None:
        return "null"
    return json.dumps({"value": advantage.value, "group_scale": advantage.group_scale})
