"""Jobs: submit many rollouts, get an id at once, poll status, page through results."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from judge_service.api.deps import JobsDep, TenantDep
from judge_service.api.routing import OffLoopBodyRoute
from judge_service.jobs.service import MAX_PAGE
from judge_service.schemas import (
    ERROR_RESPONSES,
    ErrorBody,
    JobCreated,
    JobRequestBody,
    JobResultsPage,
    JobView,
)

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=OffLoopBodyRoute)

JOB_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    404: {"model": ErrorBody, "description": "No such job for this API key."},
    503: {"model": ErrorBody, "description": "The store (Redis) is unavailable; retry."},
}
JobId = Annotated[str, Path(min_length=1, max_length=64)]


@router.post(
    "",
    operation_id="create_job",
    status_code=202,
    responses={
        **JOB_ERRORS,
        409: {"model": ErrorBody, "description": "idempotency_key reused with another body."},
    },
)
async def create_job(body: JobRequestBody, jobs: JobsDep, tenant: TenantDep) -> JobCreated:
    """Queue rollouts for judging and return the job's id at once. With an
    ``idempotency_key`` already used by this API key (and the same body), the earlier job
    is returned instead of a new one."""
    job_id, _created = await jobs.submit(tenant, body)
    view = await jobs.view(tenant, job_id)
    return JobCreated(id=job_id, status=view.status)


@router.get("/{job_id}", operation_id="get_job", responses=JOB_ERRORS)
async def get_job(job_id: JobId, jobs: JobsDep, tenant: TenantDep) -> JobView:
    """Status and counts: queued, running, done, failed, cancelled."""
    return await jobs.view(tenant, job_id)


@router.get(
    "/{job_id}/results",
    operation_id="get_job_results",
    response_model=JobResultsPage,
    responses=JOB_ERRORS,
)
async def get_job_results(
    job_id: JobId,
    jobs: JobsDep,
    tenant: TenantDep,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> Response:
    """Results in input order, one per rollout, from ``cursor`` on. A page stops at the
    first rollout not judged yet: poll again with ``next_cursor`` until it is null."""
    page = await jobs.results_page(tenant, job_id, cursor, limit)
    return Response(content=page, media_type="application/json")


@router.delete("/{job_id}", operation_id="cancel_job", responses=JOB_ERRORS)
async def cancel_job(job_id: JobId, jobs: JobsDep, tenant: TenantDep) -> JobView:
    """Cancel the rollouts not started yet (they get a ``failed`` result saying so); those
    being judged finish. Cancelling a finished job changes nothing."""
    return await jobs.cancel(tenant, job_id)
