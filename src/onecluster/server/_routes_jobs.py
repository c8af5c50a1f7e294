"""Job routes: submit, list, show, cancel, logs, why (admins, and members for their team)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from onecluster.errors import NotFoundError
from onecluster.model import MAX_LABEL, JobState
from onecluster.schema import MAX_ID, MAX_INT, ErrorOut, JobOut, JobSubmit, LogsOut, WhyOut
from onecluster.server._control import ControlPlane
from onecluster.server._deps import Caller, Control, Submissions
from onecluster.server._views import job_out
from onecluster.server._why import job_why

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

JobId = Annotated[str, Path(max_length=MAX_ID)]
_NAME = Query(max_length=MAX_LABEL)
_UNKNOWN_JOB: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "There is no such job."}
}


@router.post(
    "",
    status_code=201,
    response_model=None,
    responses={
        201: {"model": JobOut},
        422: {"model": ErrorOut, "description": "No site could ever run the job."},
    },
)
async def submit(
    body: JobSubmit, control: Control, caller: Caller, submissions: Submissions
) -> Response:
    """Submit a job; 422 if no site of the fabric could ever run it.

    The hottest route: the answer is serialised once by pydantic, not validated again by
    FastAPI (``response_model=None``; the OpenAPI schema still names :class:`JobOut`).
    """
    caller.require_team(body.team)
    if control.data.knows(body.dataset):
        spec = control.admit(body)  # pure and fast: fine on the event loop
    else:  # a dataset registered since the catalog was read, or a typo: the store is asked
        spec = await asyncio.to_thread(control.admit, body)
    job = job_out(await submissions.submit(spec))
    return Response(job.model_dump_json(), status_code=201, media_type="application/json")


@router.get(
    "", responses={404: {"model": ErrorOut, "description": "There is no such team or site."}}
)
def list_jobs(
    *,
    control: Control,
    caller: Caller,
    state: JobState | None = None,
    team: Annotated[str | None, _NAME] = None,
    site: Annotated[str | None, _NAME] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
) -> list[JobOut]:
    """Jobs, newest first; members see their own team's only.  A ``team`` or ``site`` the
    fabric lacks is a 404 (a typo must not read as "no jobs")."""
    caller.require_member()
    _require_known(control, team=team, site=site)
    if not caller.is_admin:
        if team is not None:
            caller.require_team(team)
        team = caller.team
    jobs = control.store.jobs(
        state=None if state is None else state.value,
        team=team,
        site=site,
        limit=limit,
        offset=offset,
    )
    return [job_out(j) for j in jobs]


@router.get("/{job_id}", responses=_UNKNOWN_JOB)
def show(job_id: JobId, control: Control, caller: Caller) -> JobOut:
    """One job."""
    caller.require_member()
    job = control.store.job(job_id)
    caller.require_team(job.team)
    return job_out(job)


@router.post(
    "/{job_id}/cancel",
    responses={
        **_UNKNOWN_JOB,
        409: {"model": ErrorOut, "description": "The job has already ended."},
    },
)
def cancel(job_id: JobId, control: Control, caller: Caller) -> JobOut:
    """Cancel a job: pending ones at once, running ones once their processes exit (409 if
    it already ended)."""
    caller.require_member()
    caller.require_team(control.store.job(job_id).team)
    return job_out(control.store.cancel_job(job_id, now=control.clock.now()))


@router.get("/{job_id}/logs", responses=_UNKNOWN_JOB)
def logs(
    job_id: JobId,
    control: Control,
    caller: Caller,
    offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
) -> LogsOut:
    """The job's log from ``offset``; ask again with the returned ``offset`` to follow it."""
    caller.require_member()
    caller.require_team(control.store.job(job_id).team)
    next_offset, data = control.store.logs(job_id, offset)
    return LogsOut(offset=next_offset, data=data)


@router.get(
    "/{job_id}/why",
    responses={
        **_UNKNOWN_JOB,
        409: {
            "model": ErrorOut,
            "description": "The job is not pending (the message says its state).",
        },
    },
)
def why(job_id: JobId, control: Control, caller: Caller) -> WhyOut:
    """Why a pending job waits and what it waits behind: its fair-share priority and place
    in line, its team's guarantee, every pool it may use, and what the scheduler's pass
    would do with it now (409 for a job that is not pending)."""
    caller.require_member()
    job = control.store.job(job_id)
    caller.require_team(job.team)
    return job_why(control, job)


def _require_known(control: ControlPlane, *, team: str | None, site: str | None) -> None:
    if team is not None and control.fabric.team(team) is None:
        known = ", ".join(t.name for t in control.fabric.teams) or "none"
        msg = f"there is no team {team!r} in fabric {control.fabric.name}"
        raise NotFoundError(msg, hint=f"known teams: {known}")
    if site is not None:
        control.require_site(site)
