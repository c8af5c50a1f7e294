"""Before and after, per team, for a month of real jobs: the month's jobs are replayed under
the one queue and under separate per-site queues (the simulator, the same scheduler core),
so an admin can show every team what joining gained it (``onecluster report gpu
--compare separate``).

Each job of the month (submitted in it) replays as it was asked: its submit time, GPUs,
acceptable types, team, sites it may span, priority class, pre-emptibility and checkpoints;
it runs for what it really ran (its last attempt's span) when it
completed, else for its estimate.  Datasets are left out: the month's replicas are not the
replay's to know.  Both worlds see the same jobs, so the comparison is like for like; what
really happened is in the report's other tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from onecluster.model import AttemptRecord, Fabric, JobRecord, JobState
from onecluster.reports import Month
from onecluster.scheduler import PolicyConfig, PolicyKind
from onecluster.simulate import compare_teams, simulate
from onecluster.workload import TraceJob

__all__ = ["before_after"]


def before_after(
    fabric: Fabric,
    month: Month,
    usage: Sequence[tuple[AttemptRecord, JobRecord]],
    *,
    baseline: str,
    now: float,
    policy: PolicyConfig | None = None,
) -> dict[str, object]:
    """The per-team comparison (JSON-ready) of the jobs submitted in ``month``."""
    last: dict[str, tuple[AttemptRecord, JobRecord]] = {}
    for attempt, job in usage:
        if not month.start <= job.submitted_at < month.end:
            continue
        seen = last.get(job.id)
        if seen is None or attempt.run > seen[0].run:
            last[job.id] = (attempt, job)
    trace = [_trace_job(fabric, attempt, job, now) for attempt, job in last.values()]
    trace.sort(key=lambda j: j.submit_time)
    out: dict[str, object] = {
        "month": str(month),
        "after": "unified",
        "before": baseline,
        "jobs": len(trace),
    }
    if not trace:
        out["teams"] = []
        out["losing_teams"] = []
        return out
    base = trace[0].submit_time
    rebased = [
        TraceJob(
            submit_time=j.submit_time - base,
            duration_s=j.duration_s,
            gpus=j.gpus,
            team=j.team,
            gpu_types=j.gpu_types,
            home_site=j.home_site,
            max_sites=j.max_sites,
            priority=j.priority,
            preemptible=j.preemptible,
            checkpoint_interval_s=j.checkpoint_interval_s,
            checkpoint_on_sigterm=j.checkpoint_on_sigterm,
        )
        for j in trace
    ]
    live = policy or PolicyConfig()  # the server's settings: fair share, grace
    unified = simulate(fabric, rebased, config=replace(live, kind="unified"))
    separate = simulate(fabric, rebased, config=replace(live, kind=cast(PolicyKind, baseline)))
    rows = compare_teams(unified, separate)
    out["teams"] = [r.to_json() for r in rows]
    out["losing_teams"] = [r.team for r in rows if r.loses]
    out["rejected"] = {"unified": unified.jobs_rejected, baseline: separate.jobs_rejected}
    return out


def _trace_job(fabric: Fabric, attempt: AttemptRecord, job: JobRecord, now: float) -> TraceJob:
    ran = job.duration_s
    if job.state is JobState.COMPLETED:
        start, end = attempt.billed_span(now)
        ran = max(end - start, 1.0)
    team = fabric.team(job.team)
    return TraceJob(
        submit_time=job.submitted_at,
        duration_s=ran,
        gpus=job.gpus,
        team=job.team,
        gpu_types=job.gpu_types,
        home_site=team.home_site if team is not None else None,
        max_sites=job.max_sites,
        priority=job.priority,
        preemptible=job.preemptible,
        checkpoint_interval_s=job.checkpoint_interval_s,
        checkpoint_on_sigterm=job.checkpoint_on_sigterm,
    )
