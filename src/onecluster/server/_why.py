"""``GET /jobs/{id}/why``: the scheduler's explanation of a pending job, on the view and the
queue a reconcile pass would decide on now."""

from __future__ import annotations

from typing import cast

from onecluster.errors import ConflictError
from onecluster.model import JobRecord, JobState
from onecluster.scheduler import Explanation, PendingJob, PendingQueue, explain
from onecluster.schema import (
    GuaranteeOut,
    PartOut,
    PoolWhyOut,
    PriorityName,
    ReclaimOut,
    ReservedOut,
    TeamAheadOut,
    WhyOut,
)
from onecluster.server._control import ControlPlane
from onecluster.server._scheduling import scheduler_view

__all__ = ["job_why", "why_out"]


def job_why(control: ControlPlane, job: JobRecord) -> WhyOut:
    """Why ``job`` waits; :class:`ConflictError` (naming its state) unless it is pending.

    The explanation replays a pass on the pending queue the reconcile loop keeps, holding it
    as a pass does (submissions wait for it: it takes about two passes' time).
    """
    if job.state is not JobState.PENDING:
        msg = f"job {job.id} is {job.state.value}, not pending: only a pending job waits for GPUs"
        raise ConflictError(msg, hint=f"`onecluster jobs {job.id}` shows where it is")
    now = control.clock.now()
    view = scheduler_view(control, now)
    with control.pending.for_pass() as kept:
        queue = kept
        if job.id not in kept:
            # Committed a moment ago and not queued for the passes yet: explain it as the
            # next pass will see it, without touching the loop's queue.
            pending = PendingJob(job_id=job.id, spec=job.spec(), submitted_at=job.submitted_at)
            queue = PendingQueue.of([*kept, pending])
        explanation = explain(control.scheduler, view, queue, job.id, now)
    return why_out(explanation)


def why_out(e: Explanation) -> WhyOut:
    """The API body of ``e``."""
    return WhyOut(
        job_id=e.job_id,
        team=e.team,
        gpus=e.gpus,
        gpu_types=list(e.gpu_types),
        priority_class=cast("PriorityName", e.priority_class.name.lower()),
        policy=e.policy,
        now=e.now,
        waited_s=e.waited_s,
        usage_gpus=e.usage_gpus,
        weight=e.weight,
        fair_factor=e.fair_factor,
        age_factor=e.age_factor,
        priority=e.priority,
        pending=e.pending,
        ahead=e.ahead,
        ahead_higher_class=e.ahead_higher_class,
        ahead_same_class=e.ahead_same_class,
        teams_ahead=[
            TeamAheadOut(team=t.team, priority=t.priority, jobs=t.jobs, gpus=t.gpus)
            for t in e.teams_ahead
        ],
        home_site=e.home_site,
        guarantee=[
            GuaranteeOut(
                gpu_type=g.gpu_type, site=g.site, gpus=g.gpus, used=g.used, borrowed=g.borrowed
            )
            for g in e.guarantee
        ],
        pools=[
            PoolWhyOut(
                site=p.site,
                gpu_type=p.gpu_type,
                status=p.status,
                gpus=p.gpus,
                free=p.free,
                left=p.left,
                draining=p.draining,
                borrowed=p.borrowed,
                reserved=None
                if p.reserved is None
                else ReservedOut(
                    job_id=p.reserved.job_id, gpus=p.reserved.gpus, start_at=p.reserved.start_at
                ),
                terms=p.terms,
                frees_within_grace=p.frees_within_grace,
                staging_bytes=p.staging_bytes,
                staging_s=p.staging_s,
            )
            for p in e.pools
        ],
        verdict=e.verdict,
        starts=[PartOut(site=p.site, gpu_type=p.gpu_type, gpus=p.gpus) for p in e.starts],
        borrowed=e.borrowed,
        reclaims=[
            ReclaimOut(job_id=r.job_id, team=r.team, site=r.site, gpus=r.gpus, reason=r.reason)
            for r in e.reclaims
        ],
        held_for=list(e.held_for),
        behind=e.behind,
        reserved=[PartOut(site=r.site, gpu_type=r.gpu_type, gpus=r.gpus) for r in e.reservations],
        expected_start_at=e.expected_start_at,
        grace_s=e.grace_s,
        summary=e.summary,
    )
