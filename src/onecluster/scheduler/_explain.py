"""Why a pending job waits: its place in line, its guarantee, the pools it may use, and what
this very pass would do with it (``onecluster jobs ID --why``).

Pure, like the rest of the scheduler.  :func:`explain` reads the inputs of
:meth:`Scheduler.plan`, asks it for the plan (so "starts now" is the scheduler's own answer)
and replays the same pass traced (:mod:`onecluster.scheduler._replay`) to learn what the pass
did with the job and which jobs hold the pools' backfill reservations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from onecluster.errors import NotFoundError
from onecluster.model import PriorityClass, SitePart
from onecluster.scheduler._config import PolicyKind
from onecluster.scheduler._ledger import AllocationLedger
from onecluster.scheduler._pass import Outcome, PassState
from onecluster.scheduler._queue import PendingQueue, _bucket_key
from onecluster.scheduler._replay import TracedPass, pass_state, replay
from onecluster.scheduler._scheduler import Scheduler
from onecluster.scheduler._state import ClusterView, PendingJob, Plan
from onecluster.scheduler._summary import summarize

__all__ = [
    "Explanation",
    "GuaranteeUse",
    "PoolStanding",
    "Reclaim",
    "Reserved",
    "TeamAhead",
    "Verdict",
    "explain",
]

#: What this pass does with the job: ``starts`` it; it ``reclaims`` GPUs by preemption
#: (starts once its victims have left); it ``claims`` GPUs being freed already; it is
#: ``reserved`` the next GPUs to free in one pool; it is ``held_back`` (it fits in free GPUs,
#: but only by delaying a reserved job); it is ``deferred`` (it could only borrow idle GPUs
#: and in-quota work took them first); it is ``blocked`` (too few free GPUs where it may
#: run); or it was ``not_reached`` (the pass ran out of GPUs and victims first, or an older
#: job of its team and shape did not fit, and a pass tries none behind such a job).
Verdict = Literal[
    "starts", "reclaims", "claims", "reserved", "held_back", "deferred", "blocked", "not_reached"
]
#: On what terms the job would run in a pool: within its team's guarantee (``quota``);
#: beyond it at its team's home site (``home``: it reclaims from teams homed elsewhere);
#: beyond it elsewhere (``borrowed``: idle GPUs only, pre-emptible); ``open`` where the policy
#: has no quotas.
Terms = Literal["quota", "home", "borrowed", "open"]
#: ``closed``: up, but takes no new work (its cluster is degraded, or an operator drained
#: it); ``down``: nothing runs there.
PoolStatus = Literal["up", "closed", "down"]

#: How many teams ahead an explanation names.
TEAMS_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamAhead:
    """A team whose pending jobs of the job's class go first: the priority of its first job
    ahead (its highest), and how many jobs (and GPUs) it has ahead."""

    team: str
    priority: float
    jobs: int
    gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GuaranteeUse:
    """The team's guarantee of one GPU type and what it holds of that type now.

    ``site``: ``None`` for a declared quota (it holds at any site); the home site for a
    derived one (it holds only there).  ``used``: GPUs held within the guarantee;
    ``borrowed``: GPUs held beyond it.
    """

    gpu_type: str
    site: str | None
    gpus: int
    used: int
    borrowed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Reserved:
    """A backfill reservation: ``job_id`` is to get ``gpus`` GPUs of a pool first, expected
    at ``start_at`` (when enough running jobs there will have ended)."""

    job_id: str
    gpus: int
    start_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolStanding:
    """A pool the job may use, as this pass finds it.

    ``free``: GPUs free when the pass begins; ``left``: free once the pass has placed what it
    places; ``draining``: held by jobs being preempted or cancelled; ``borrowed``: held by
    work beyond its team's guarantee (any team's).  ``reserved``: the reservation in this pool
    at the end of the pass (possibly the job's own).  ``terms``: as the pass found them when
    it tried the job (after its team's jobs placed before it), else as the pass began.
    ``frees_within_grace``: enough GPUs free up here by themselves within the preemption
    grace, so the job would wait for them rather than preempt.  ``staging_s``: seconds to
    bring the job's dataset here (``staging_bytes`` missing), ``None`` if it cannot get here
    at all.
    """

    site: str
    gpu_type: str
    status: PoolStatus
    gpus: int
    free: int
    left: int
    draining: int
    borrowed: int
    reserved: Reserved | None
    terms: Terms
    frees_within_grace: bool
    staging_bytes: int
    staging_s: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reclaim:
    """A running job this pass preempts so that the job gets its GPUs."""

    job_id: str
    team: str
    site: str
    gpus: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """Why a pending job waits, and what it waits behind.

    Fair share (:class:`~onecluster.scheduler.FairShare`): ``priority = usage_weight ×
    fair_factor + age_weight × age_factor``, the factor from the team's ``usage_gpus`` against
    its ``weight``.  Place in line: ``ahead_higher_class`` pending jobs of a higher priority
    class and ``ahead_same_class`` of its own class with a higher priority (or as high and
    served first: a team's older job, a team named earlier) are served before it; under
    ``fifo``, ``ahead_same_class`` counts every job submitted before it.  (In-quota work of
    any class is placed before borrowed work; the order here is the order within one round.)
    ``starts``, ``borrowed`` and ``reclaims`` are the plan's; ``held_for`` names the reserved
    jobs it would delay; ``reservations`` the GPUs held for it (several pools for a gang),
    expected to be its by ``expected_start_at``;
    ``behind`` the older job of its team, class and shape that the pass could not place, so
    that it tried none behind it (a pass skips the rest of a shape whose head does not fit).
    """

    job_id: str
    team: str
    gpus: int
    gpu_types: tuple[str, ...]
    priority_class: PriorityClass
    policy: PolicyKind
    now: float
    waited_s: float
    usage_gpus: float
    weight: float
    fair_factor: float
    age_factor: float
    priority: float
    pending: int
    ahead_higher_class: int
    ahead_same_class: int
    teams_ahead: tuple[TeamAhead, ...]
    home_site: str | None
    guarantee: tuple[GuaranteeUse, ...]
    pools: tuple[PoolStanding, ...]
    verdict: Verdict
    starts: tuple[SitePart, ...]
    borrowed: bool
    reclaims: tuple[Reclaim, ...]
    held_for: tuple[str, ...]
    behind: str | None
    reservations: tuple[SitePart, ...]
    expected_start_at: float | None
    grace_s: float
    summary: str

    @property
    def ahead(self) -> int:
        """Pending jobs served before it."""
        return self.ahead_higher_class + self.ahead_same_class


def explain(
    scheduler: Scheduler, view: ClusterView, queue: PendingQueue, job_id: str, now: float
) -> Explanation:
    """Explain pending job ``job_id`` of ``queue`` as :meth:`Scheduler.plan` sees it at ``now``.

    Raises :class:`NotFoundError` if ``queue`` does not hold ``job_id`` (only a pending job
    waits).  Costs two passes and one walk over the queue; reads and changes nothing else.
    """
    job = queue.get(job_id)
    if job is None:
        msg = f"job {job_id} is not pending: only a pending job waits for GPUs"
        raise NotFoundError(msg, hint=f"`onecluster jobs {job_id}` shows its state")
    running = view.running
    ledger = running if isinstance(running, AllocationLedger) else AllocationLedger.of(running)
    view = replace(view, running=ledger)  # built once for the plan, the replay and the rest
    plan = scheduler.plan(view, queue, now)
    before = pass_state(PassState, scheduler, ledger, view, now)
    traced = replay(scheduler, ledger, view, queue, now, job_id=job_id)
    spec = job.spec
    team = spec.team
    config = scheduler.config
    fair = config.fair_share
    waited = max(now - job.submitted_at, 0.0)
    higher, same, teams = _rank(before, queue, job, fifo=config.kind == "fifo")
    start = next((s for s in plan.starts if s.job_id == job_id), None)
    reclaims = _reclaims(plan, ledger, job_id)
    verdict = _verdict(traced, start is not None, bool(reclaims))
    own = [traced.reservations[key] for key in sorted(traced.own)]
    explanation = Explanation(
        job_id=job_id,
        team=team,
        gpus=spec.gpus,
        gpu_types=spec.gpu_types,
        priority_class=spec.priority,
        policy=config.kind,
        now=now,
        waited_s=waited,
        usage_gpus=before.usage(team),
        weight=before.weight(team),
        fair_factor=before.fair_factor(team),
        age_factor=min(waited / fair.max_age_s, 1.0),
        priority=before.priority(team, job.submitted_at),
        pending=len(queue),
        ahead_higher_class=higher,
        ahead_same_class=same,
        teams_ahead=teams,
        home_site=before.home(team),
        guarantee=_guarantee(scheduler, ledger, job),
        pools=_pools(scheduler, before, traced, job),
        verdict=verdict,
        starts=start.parts if start is not None else (),
        borrowed=start.borrowed if start is not None else False,
        reclaims=reclaims,
        held_for=tuple(sorted(traced.held_for)) if verdict == "held_back" else (),
        behind=_behind(traced, queue, job) if verdict == "not_reached" else None,
        reservations=tuple(SitePart(site=r.pool[0], gpu_type=r.pool[1], gpus=r.gpus) for r in own),
        expected_start_at=max((r.shadow for r in own), default=None),
        grace_s=config.grace_s,
        summary="",
    )
    return replace(explanation, summary=summarize(explanation))


def _verdict(traced: TracedPass, starts: bool, reclaims: bool) -> Verdict:
    if starts:
        return "starts"
    if reclaims:
        return "reclaims"
    events = traced.events
    if Outcome.WAITING in events:
        return "claims"
    if traced.own:
        return "reserved"
    if not events:
        return "not_reached"
    tried = [e for e in events if e != Outcome.DEFERRED]
    if tried and tried[-1] == Outcome.HELD_BACK:
        return "held_back"
    if events[-1] == Outcome.DEFERRED:
        return "deferred"
    return "blocked"


def _behind(traced: TracedPass, queue: PendingQueue, job: PendingJob) -> str | None:
    """The last job of ``job``'s bucket before it that the pass tried and did not place."""
    key = _bucket_key(job)
    order = {j.job_id: (j.submitted_at, seq) for seq, j in enumerate(queue)}  # as buckets sort
    mine = order[job.job_id]
    tried = (
        j
        for j in queue
        if traced.tried.get(j.job_id) not in (None, Outcome.STARTED, Outcome.HELD_BACK)
        and order[j.job_id] < mine
        and _bucket_key(j) == key
    )
    last = max(tried, key=lambda j: order[j.job_id], default=None)
    return None if last is None else last.job_id


# -- the parts -------------------------------------------------------------------------------


def _rank(
    state: PassState, queue: PendingQueue, job: PendingJob, *, fifo: bool
) -> tuple[int, int, tuple[TeamAhead, ...]]:
    """(jobs of a higher class ahead, jobs of its class ahead, the first teams ahead).

    The order of a fair pass: class, then priority (a team's oldest job first, the team named
    first on a tie), then age; the queue's own order breaks what is left.  ``fifo``: submit
    order alone.
    """
    mine_class = int(job.spec.priority)
    higher = same = 0
    teams: dict[str, list[float]] = {}  # team → [priority of its first job ahead, jobs, gpus]
    mine: tuple[float, str, float, int] | None = None
    keyed: list[tuple[tuple[float, str, float, int], PendingJob]] = []
    for seq, other in enumerate(queue):
        spec = other.spec
        if fifo:
            key: tuple[float, str, float, int] = (0.0, "", other.submitted_at, seq)
        elif int(spec.priority) != mine_class:
            higher += int(spec.priority) > mine_class
            continue
        else:
            prio = state.priority(spec.team, other.submitted_at)
            key = (-prio, spec.team, other.submitted_at, seq)
        if other.job_id == job.job_id:
            mine = key
        keyed.append((key, other))
    assert mine is not None
    for key, other in keyed:
        if key >= mine:
            continue
        same += 1
        spec = other.spec
        found = teams.get(spec.team)
        prio = state.priority(spec.team, other.submitted_at)
        if found is None:
            teams[spec.team] = [prio, 1, spec.gpus]
        else:
            found[0] = max(found[0], prio)
            found[1] += 1
            found[2] += spec.gpus
    ahead = sorted(teams.items(), key=lambda t: (-t[1][0], t[0]))[:TEAMS_SHOWN]
    return (
        higher,
        same,
        tuple(TeamAhead(team=t, priority=p, jobs=int(n), gpus=int(g)) for t, (p, n, g) in ahead),
    )


def _guarantee(
    scheduler: Scheduler, ledger: AllocationLedger, job: PendingJob
) -> tuple[GuaranteeUse, ...]:
    team = job.spec.team
    granted = scheduler.guarantees.get(team)
    if granted is None or not scheduler.config.quotas:
        return ()
    nominal = ledger.nominal.get(team, {})
    borrowed = ledger.borrowed.get(team, {})
    return tuple(
        GuaranteeUse(
            gpu_type=t,
            site=granted.site,
            gpus=granted.gpus.get(t, 0),
            used=nominal.get(t, 0),
            borrowed=borrowed.get(t, 0),
        )
        for t in (job.spec.gpu_types or sorted(granted.gpus))
    )


def _pools(
    scheduler: Scheduler, before: PassState, traced: TracedPass, job: PendingJob
) -> tuple[PoolStanding, ...]:
    """Every pool of an acceptable type at a site the job may use, shut sites included."""
    spec = job.spec
    view = before.view
    home = before.home(spec.team)
    only = job.pinned_site
    rooms = traced.rooms or {}
    out = []
    for p in scheduler._pools:
        if spec.gpu_types and p.gpu_type not in spec.gpu_types:
            continue
        if (only is not None and p.site != only) or (scheduler.config.home_only and p.site != home):
            continue
        status: PoolStatus = (
            "down"
            if p.site in view.down_sites
            else "closed"
            if p.site in view.closed_sites or p.key in view.closed_pools
            else "up"
        )
        count = min(p.count, view.capacity.get(p.key, p.count))
        res = traced.reservations.get(p.key)
        missing, staging_s = before.staging(job, p.site)
        out.append(
            PoolStanding(
                site=p.site,
                gpu_type=p.gpu_type,
                status=status,
                gpus=count,
                free=before.free.get(p.key, 0),
                left=traced.free.get(p.key, 0),
                draining=before.ledger.draining.get(p.key, 0),
                borrowed=sum(
                    part.gpus
                    for a in before.ledger.in_pool(p.key)
                    if a.borrowed
                    for part in a.parts
                    if (part.site, part.gpu_type) == p.key
                ),
                reserved=None
                if res is None
                else Reserved(
                    job_id=traced.holders.get(p.key, "?"), gpus=res.gpus, start_at=res.shadow
                ),
                terms=_terms(before, rooms.get(p.key), job, p.site, p.gpu_type),
                frees_within_grace=p.key in before.free
                and before.frees_within_grace(
                    p, before.free[p.key] + before.draining[p.key], spec.gpus
                ),
                staging_bytes=missing,
                staging_s=None if math.isinf(staging_s) else staging_s,
            )
        )
    return tuple(out)


def _terms(
    before: PassState, room: float | None, job: PendingJob, site: str, gpu_type: str
) -> Terms:
    """``room``: within its guarantee there when the pass tried it (``None``: not tried)."""
    if not before.config.quotas:
        return "open"
    if room is None:
        room = before.nominal_room(job.spec.team, site, gpu_type)
    if room >= job.spec.gpus:
        return "quota"
    return "home" if site == before.home(job.spec.team) else "borrowed"


def _reclaims(plan: Plan, ledger: AllocationLedger, job_id: str) -> tuple[Reclaim, ...]:
    out: list[Reclaim] = []
    for p in plan.preemptions:
        victim = ledger.get(p.job_id) if p.for_job_id == job_id else None
        if victim is not None:
            out.extend(
                Reclaim(
                    job_id=p.job_id,
                    team=victim.team,
                    site=part.site,
                    gpus=part.gpus,
                    reason=p.reason,
                )
                for part in victim.parts
            )
    return tuple(out)
