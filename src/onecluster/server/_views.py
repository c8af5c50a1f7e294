"""Read models: store records and the fabric turned into API bodies and scheduler views, and
an agent's sync body into the store's value (pure)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from onecluster.errors import NotFoundError
from onecluster.model import (
    AttemptRecord,
    AttemptState,
    Fabric,
    JobRecord,
    JobState,
    SitePart,
    SiteStatus,
    gang_port,
)
from onecluster.scheduler import Allocation, ClusterView
from onecluster.schema import (
    AgentSync,
    DesiredAttempt,
    JobOut,
    PartOut,
    PoolOut,
    SiteOut,
    SiteStatsOut,
    StatsOut,
    TeamOut,
)
from onecluster.store import (
    AgentReport,
    Assignment,
    GangMember,
    LogChunk,
    SiteRecord,
    SyncReport,
)

__all__ = [
    "Running",
    "cluster_view",
    "desired_attempt",
    "gang_env",
    "job_out",
    "require_site",
    "site_status",
    "sites_out",
    "stats_out",
    "sync_report",
    "teams_out",
]

#: Jobs holding GPUs now, each with its active attempts.
Running = Sequence[tuple[JobRecord, Sequence[AttemptRecord]]]


def job_out(job: JobRecord) -> JobOut:
    """The API body of a job."""
    return JobOut(
        id=job.id,
        name=job.name,
        team=job.team,
        state=job.state.value,
        gpus=job.gpus,
        gpu_types=list(job.gpu_types),
        duration_s=job.duration_s,
        dataset=job.dataset,
        dataset_bytes=job.dataset_bytes,
        priority=job.priority.name.lower(),
        preemptible=job.preemptible,
        command=list(job.command),
        max_sites=job.max_sites,
        submitted_at=job.submitted_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        parts=[PartOut(site=p.site, gpu_type=p.gpu_type, gpus=p.gpus) for p in job.parts],
        borrowed=job.borrowed,
        attempts=job.attempts,
        preemptions=job.preemptions,
        exit_code=job.exit_code,
        reason=job.reason,
        expected_start_at=job.expected_start_at,
        workdir=job.workdir,
        checkpoint_interval_s=job.checkpoint_interval_s,
        checkpoint_on_sigterm=job.checkpoint_on_sigterm,
    )


def desired_attempt(a: Assignment, *, grace_s: float) -> DesiredAttempt:
    """The sync reply entry of one assignment, with the environment its command gets
    (``docs/contracts.md``, "The attempt's environment")."""
    env = {
        "ONECLUSTER_JOB_ID": a.job_id,
        "ONECLUSTER_ATTEMPT_ID": a.attempt_id,
        "ONECLUSTER_SITE": a.site,
        "ONECLUSTER_GPU_TYPE": a.gpu_type,
        "ONECLUSTER_GPUS": str(a.gpus),
        **gang_env(a),
    }
    if a.dataset_dir is not None:
        env["ONECLUSTER_DATASET_DIR"] = a.dataset_dir
    if a.checkpoint_interval_s is not None:
        env["ONECLUSTER_CHECKPOINT_INTERVAL_S"] = _seconds(a.checkpoint_interval_s)
    return DesiredAttempt(
        attempt_id=a.attempt_id,
        job_id=a.job_id,
        action=a.action,
        command=list(a.command),
        gpu_type=a.gpu_type,
        gpus=a.gpus,
        env=env,
        grace_s=grace_s,
        reason=a.reason,
        handed_to=a.handed_to,
        workdir=a.workdir,
    )


def _seconds(value: float) -> str:
    """Seconds as a program parses them most easily: ``600`` for a whole number, else the
    shortest decimal that reads back exactly (``0.5``)."""
    return str(int(value)) if value.is_integer() else repr(value)


def gang_env(a: Assignment) -> dict[str, str]:
    """``ONECLUSTER_GANG_*``: how the attempts of one run at several sites find each other.

    ``SITES``: the sites in part order; ``RANK``: this attempt's site's index there;
    ``ADDRESSES``: ``site=address`` of the sites whose address is known (the others are left
    out, and it may be empty); ``GPUS``: ``site=gpus`` of every site; ``PORT``: the job's base
    port (:func:`~onecluster.model.gang_port`).  Every attempt of the run gets the same values
    but ``RANK``.  An assignment without a gang, or whose gang lacks its own site, is a gang of
    itself alone (rank 0).
    """
    gang = a.gang
    if not any(m.site == a.site for m in gang):
        gang = (GangMember(site=a.site, address=None, gpus=a.gpus),)
    sites = [m.site for m in gang]
    return {
        "ONECLUSTER_GANG_SITES": ",".join(sites),
        "ONECLUSTER_GANG_RANK": str(sites.index(a.site)),
        "ONECLUSTER_GANG_ADDRESSES": ",".join(
            f"{m.site}={m.address}" for m in gang if m.address is not None
        ),
        "ONECLUSTER_GANG_GPUS": ",".join(f"{m.site}={m.gpus}" for m in gang),
        "ONECLUSTER_GANG_PORT": str(gang_port(a.job_id)),
    }


def sync_report(body: AgentSync) -> SyncReport:
    """The store's value of an agent's sync body."""
    return SyncReport(
        agent_id=body.agent_id,
        backend=body.backend,
        capacity=dict(body.capacity),
        problem=body.problem,
        attempts=tuple(
            AgentReport(
                attempt_id=a.attempt_id,
                state=a.state,
                exit_code=a.exit_code,
                reason=a.reason,
                queued=a.queued,
                expected_start_at=a.expected_start_at,
                waiting_reason=a.waiting_reason,
                started_at=a.started_at,
                finished_at=a.finished_at,
            )
            for a in body.attempts
        ),
        logs=tuple(
            LogChunk(attempt_id=c.attempt_id, offset=c.offset, data=c.data) for c in body.logs
        ),
    )


def require_site(fabric: Fabric, site: str) -> None:
    """:class:`NotFoundError` naming the known sites unless ``site`` is in ``fabric``."""
    if not fabric.has_site(site):
        msg = f"there is no site {site!r} in fabric {fabric.name}"
        raise NotFoundError(msg, hint=f"known sites: {', '.join(fabric.site_names)}")


#: An agent syncs every second or so: one silent this long gets no new work, while the work
#: it runs keeps its lease (``--lease``, minutes) — an outage of the control plane's side of
#: the network must not stop it, and new work must not wait there for an agent that is gone.
SILENT_S = 30.0


def site_status(record: SiteRecord | None, *, now: float) -> SiteStatus:
    """``unknown`` before the first sync; ``down`` when marked or its lease ran out;
    ``degraded`` while its agent says the site's cluster cannot take work, or has been silent
    for :data:`SILENT_S`; else ``up``."""
    if record is None:
        return "unknown"
    if record.down or record.lease_ended(now):
        return "down"
    return "up" if site_problem(record, now=now) is None else "degraded"


def site_problem(record: SiteRecord | None, *, now: float) -> str | None:
    """What keeps a site from taking new work, in words: what its agent reported, else (for a
    site not down) a silence of over :data:`SILENT_S`; None when nothing does."""
    if record is None or record.problem is not None or record.down or record.lease_ended(now):
        return None if record is None else record.problem
    if now - record.last_heartbeat > SILENT_S:
        return (
            f"its agent has not synced for {now - record.last_heartbeat:.0f} s: no new work "
            "goes there; what runs keeps its lease"
        )
    return None


def cluster_view(
    fabric: Fabric,
    running: Running,
    sites: Sequence[SiteRecord],
    *,
    now: float,
    circuit_load: Mapping[str, float] | None = None,
    registered: Mapping[str, frozenset[str]] | None = None,
    usage: Mapping[str, float] | None = None,
) -> ClusterView:
    """What the scheduler sees: running allocations, sites not up, dataset replicas, and the
    load of each circuit (a circuit that is down counts as full).

    A dataset's replicas are the sites its fabric entry names and, for a registered one
    (``registered``: name → sites), the sites holding all of its latest version.

    A site whose agent never synced counts as down: nothing could run there.  ``usage``:
    each team's decayed GPU-seconds, for fair share.
    """
    by_site = {s.site: s for s in sites}
    status = {n: site_status(by_site.get(n), now=now) for n in fabric.site_names}
    down = frozenset(n for n, s in status.items() if s in ("down", "unknown"))
    closed = frozenset(n for n, s in status.items() if s == "degraded")
    allocations = []
    for job, attempts in running:
        started = min(a.started_at for a in attempts)
        allocations.append(
            Allocation(
                job_id=job.id,
                team=job.team,
                parts=tuple(
                    SitePart(site=a.site, gpu_type=a.gpu_type, gpus=a.gpus) for a in attempts
                ),
                priority=job.priority,
                borrowed=job.borrowed,
                preemptible=job.preemptible,
                started_at=started,
                expected_end=started + job.duration_s,
                draining=job.state in (JobState.PREEMPTING, JobState.CANCELLING)
                or any(a.state is AttemptState.STOPPING for a in attempts),
                checkpoint_interval_s=job.checkpoint_interval_s,
                checkpoint_on_sigterm=job.checkpoint_on_sigterm,
            )
        )
    replicas = {d.name: frozenset(d.sites) for d in fabric.datasets}
    for name, holding in (registered or {}).items():
        replicas[name] = replicas.get(name, frozenset()) | holding
    return ClusterView(
        running=tuple(allocations),
        down_sites=down,
        closed_sites=closed,
        replicas=replicas,
        capacity=_reported_capacity(fabric, by_site),
        circuit_load=MappingProxyType(dict(circuit_load or {})),
        usage=MappingProxyType(dict(usage or {})),
    )


def _reported_capacity(
    fabric: Fabric, by_site: Mapping[str, SiteRecord]
) -> dict[tuple[str, str], int]:
    """Pools whose agent reports fewer GPUs than the fabric declares (0 for a type it lacks).

    Placing work the site cannot start would leave it waiting there forever.  An agent that
    reports no capacity at all is taken at the fabric's word.
    """
    reduced: dict[tuple[str, str], int] = {}
    for site in fabric.sites:
        record = by_site.get(site.name)
        if record is None or not record.capacity:
            continue
        for pool in site.pools:
            have = record.capacity.get(pool.gpu_type, 0)
            if have < pool.count:
                reduced[(site.name, pool.gpu_type)] = max(have, 0)
    return reduced


def _held(running: Running) -> Counter[tuple[str, str]]:
    """GPUs held per (site, gpu_type)."""
    held: Counter[tuple[str, str]] = Counter()
    for _job, attempts in running:
        for a in attempts:
            held[(a.site, a.gpu_type)] += a.gpus
    return held


def sites_out(
    fabric: Fabric, running: Running, sites: Sequence[SiteRecord], *, now: float
) -> list[SiteOut]:
    """Every site of the fabric with its status and pool usage."""
    by_site = {s.site: s for s in sites}
    held = _held(running)
    out = []
    for site in fabric.sites:
        record = by_site.get(site.name)
        status = site_status(record, now=now)
        out.append(
            SiteOut(
                name=site.name,
                region=site.region,
                jurisdiction=site.jurisdiction,
                backend=site.backend,
                status=status,
                problem=site_problem(record, now=now),
                last_heartbeat=None if record is None else record.last_heartbeat,
                pools=[
                    PoolOut(
                        gpu_type=p.gpu_type,
                        count=p.count,
                        cost_per_gpu_hour=p.cost_per_gpu_hour,
                        used=held[(site.name, p.gpu_type)],
                    )
                    for p in site.pools
                ],
            )
        )
    return out


def teams_out(fabric: Fabric, running: Running) -> list[TeamOut]:
    """Every team of the fabric with the GPUs it holds (and borrows) per GPU type."""
    usage: dict[str, Counter[str]] = {t.name: Counter() for t in fabric.teams}
    borrowed: dict[str, Counter[str]] = {t.name: Counter() for t in fabric.teams}
    for job, attempts in running:
        for a in attempts:
            usage.setdefault(job.team, Counter())[a.gpu_type] += a.gpus
            if a.borrowed:
                borrowed.setdefault(job.team, Counter())[a.gpu_type] += a.gpus
    return [
        TeamOut(
            name=t.name,
            home_site=t.home_site,
            weight=t.weight,
            quota=None if t.quota is None else dict(t.quota),
            usage=dict(usage[t.name]),
            borrowed=dict(borrowed[t.name]),
        )
        for t in fabric.teams
    ]


def stats_out(
    fabric: Fabric,
    running: Running,
    counts: Mapping[JobState, int],
    *,
    preemptions: int,
    waits: Sequence[float],
    pending_by_team: Mapping[str, int],
    waiting_for_data: int = 0,
) -> StatsOut:
    """The cluster snapshot of ``GET /stats``; per-site ``pending`` counts pending jobs of
    the teams homed at that site."""
    held = _held(running)
    busy_at: Counter[str] = Counter()
    for (site, _type), n in held.items():
        busy_at[site] += n
    pending_at: Counter[str] = Counter()
    for team, n in pending_by_team.items():
        t = fabric.team(team)
        if t is not None:
            pending_at[t.home_site] += n
    busy = sum(held.values())
    total = fabric.total_gpus
    ordered = sorted(waits)
    return StatsOut(
        gpus_total=total,
        gpus_busy=busy,
        utilization=busy / total if total else 0.0,
        pending=counts.get(JobState.PENDING, 0),
        running=sum(counts.get(s, 0) for s in _HOLDING),
        borrowed=sum(1 for _, attempts in running if any(a.borrowed for a in attempts)),
        waiting_for_data=waiting_for_data,
        completed=counts.get(JobState.COMPLETED, 0),
        failed=counts.get(JobState.FAILED, 0),
        cancelled=counts.get(JobState.CANCELLED, 0),
        preemptions=preemptions,
        mean_wait_s=sum(ordered) / len(ordered) if ordered else 0.0,
        p95_wait_s=ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0.0,
        sites={
            s.name: SiteStatsOut(
                gpus=s.total_gpus, busy=busy_at[s.name], pending=pending_at[s.name]
            )
            for s in fabric.sites
        },
    )


#: States whose jobs hold GPUs (and count as running in the statistics).
_HOLDING = (JobState.RUNNING, JobState.PREEMPTING, JobState.CANCELLING)
