"""One scheduling pass: the mutable scratch state of a single call to ``Scheduler.plan``.

Nothing here outlives the pass or touches the caller's queue and ledger; the pass copies the
few sums it changes (free GPUs per pool, quota used per team) and records its decisions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from onecluster.model import Fabric, SitePart
from onecluster.scheduler._config import PolicyConfig
from onecluster.scheduler._gangs import preempt_for_gang, reserve_gang
from onecluster.scheduler._guarantees import Guarantee
from onecluster.scheduler._ledger import AllocationLedger, PoolKey
from onecluster.scheduler._network import StagingPaths
from onecluster.scheduler._preemption import Victim, VictimChoice, choose_victims, rank_victims
from onecluster.scheduler._reservations import Reservation, shadow_time
from onecluster.scheduler._state import ClusterView, PassStats, PendingJob, Preempt, Start

__all__ = ["Outcome", "PassState", "PoolInfo"]


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """A pool as the scheduler indexes it."""

    key: PoolKey
    site: str
    gpu_type: str
    count: int
    cost_per_gpu_hour: float


class Outcome:
    """What happened to a candidate job."""

    STARTED = "started"
    HELD_BACK = "held_back"  # fits in free GPUs but would delay a reserved job; skip just it
    WAITING = "waiting"  # holds GPUs freed by preemption; starts in a later pass
    DEFERRED = "deferred"  # could only borrow; retried after every in-quota job
    BLOCKED = "blocked"


class PassState:
    """Scratch state of one pass over the pending queue."""

    def __init__(
        self,
        *,
        fabric: Fabric,
        config: PolicyConfig,
        pools: tuple[PoolInfo, ...],
        guarantees: Mapping[str, Guarantee],
        ledger: AllocationLedger,
        view: ClusterView,
        now: float,
    ) -> None:
        self.fabric = fabric
        self.config = config
        self.guarantees = guarantees
        self.ledger = ledger
        self.view = view
        self.now = now
        shut = view.down_sites | view.closed_sites
        self.pools = tuple(
            p for p in pools if p.site not in shut and p.key not in view.closed_pools
        )
        self.count = {p.key: min(p.count, view.capacity.get(p.key, p.count)) for p in self.pools}
        self.free = {
            p.key: max(self.count[p.key] - ledger.used.get(p.key, 0), 0) for p in self.pools
        }
        self.total_free = sum(self.free.values())
        self.draining = {p.key: ledger.draining.get(p.key, 0) for p in self.pools}
        self.nominal_added: dict[tuple[str, str], int] = defaultdict(int)
        self.team_added: dict[str, int] = defaultdict(int)
        self.taken: set[str] = set()
        self.reservations: dict[PoolKey, Reservation] = {}
        self.starts: list[Start] = []
        self.preempts: list[Preempt] = []
        self.considered = 0
        self.waiting = 0
        self.blocked = 0
        self._paths: StagingPaths | None = None
        self._victims = any(ledger.victim_gpus.values())
        self._quota: dict[tuple[str, str, str], float] = {}
        self._homes: dict[str, str | None] = {}
        #: While set, jobs are placed only at their team's home site (the pass's home round).
        self.home_only = False
        #: Pools whose free GPUs are wanted by jobs of teams homed there: not lent away.
        self.kept: set[PoolKey] = set()
        self._victim_ranks: dict[PoolKey, tuple[Victim, ...]] = {}
        #: (pool, owner, home, priority, team) → the smallest need no victims met this pass.
        self._unmet: dict[tuple[PoolKey, bool, bool, int, str], int] = {}
        self._weight: dict[str, float] = {}
        fair = config.fair_share
        self._tau = fair.half_life_s / math.log(2)
        self._usage_total = sum(view.usage.values()) / self._tau + sum(ledger.team_gpus.values())
        self._weight_total = sum(t.weight for t in fabric.teams) or 1.0
        #: After a ``HELD_BACK`` outcome: the longest run that could still have backfilled.
        self.hold_window = 0.0
        self._candidates: dict[tuple[str | None, tuple[str, ...]], tuple[PoolInfo, ...]] = {}

    # -- sums ------------------------------------------------------------------------------

    def weight(self, team: str) -> float:
        """The team's fair-share weight (1 for a team the fabric lacks)."""
        weight = self._weight.get(team)
        if weight is None:
            t = self.fabric.team(team)
            weight = self._weight[team] = t.weight if t is not None else 1.0
        return weight

    def usage(self, team: str) -> float:
        """The team's usage in GPUs: decayed GPU-seconds ÷ the mean life, plus the GPUs it
        holds now (this pass's starts included)."""
        held = self.ledger.team_gpus.get(team, 0) + self.team_added[team]
        return self.view.usage.get(team, 0.0) / self._tau + held

    def fair_factor(self, team: str) -> float:
        """Slurm's fair-share factor ``2^(-U/S)`` (see :class:`FairShare`)."""
        if self._usage_total <= 0:
            return 1.0
        used = self.usage(team) / self._usage_total
        share = self.weight(team) / self._weight_total
        return math.exp2(-used / share)

    def priority(self, team: str, submitted_at: float) -> float:
        """The priority of ``team``'s job submitted at ``submitted_at`` (higher goes first)."""
        fair = self.config.fair_share
        age = min(max(self.now - submitted_at, 0.0) / fair.max_age_s, 1.0)
        return fair.usage_weight * self.fair_factor(team) + fair.age_weight * age

    def nominal_room(self, team: str, site: str, gpu_type: str) -> float:
        """GPUs of ``gpu_type`` at ``site`` the team may still take within its guarantee."""
        key = (team, site, gpu_type)
        quota = self._quota.get(key)
        if quota is None:
            granted = self.guarantees.get(team) if self.config.quotas else None
            found = granted.at(site, gpu_type) if granted is not None else None
            quota = self._quota[key] = math.inf if found is None else float(found)
        if quota == math.inf:
            return quota
        used = self.ledger.nominal.get(team, {}).get(gpu_type, 0)
        return quota - used - self.nominal_added[(team, gpu_type)]

    def home(self, team: str) -> str | None:
        """The team's home site (``None`` for a team the fabric lacks)."""
        if team not in self._homes:
            t = self.fabric.team(team)
            self._homes[team] = t.home_site if t is not None else None
        return self._homes[team]

    def at_home(self, job: PendingJob, p: PoolInfo) -> bool:
        """Whether ``p`` is at the home site of ``job``'s team."""
        return p.site == self.home(job.spec.team)

    def exhausted(self) -> bool:
        """Nothing more can happen this pass: no free GPU and nothing to preempt."""
        if self.total_free > 0:
            return False
        if not self.config.quotas:
            return True
        return not self._victims and not any(self.draining.values())

    def stats(self, pending: int) -> PassStats:
        """Counters for this pass."""
        return PassStats(
            pending=pending,
            considered=self.considered,
            started=len(self.starts),
            preempted=len(self.preempts),
            waiting_on_preemption=self.waiting,
            blocked_shapes=self.blocked,
            reservations=len(self.reservations),
        )

    # -- candidates --------------------------------------------------------------------------

    def candidates(self, job: PendingJob) -> tuple[PoolInfo, ...]:
        """Pools this job may use: acceptable type, site up, allowed by pin or home rule
        (``separate``, or the home round of a pass)."""
        spec = job.spec
        site = job.pinned_site
        if self.home_only or self.config.home_only:
            home = self.home(spec.team)
            if site is not None and site != home:
                return ()
            site = home
        key = (site, spec.gpu_types)
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = tuple(
                p
                for p in self.pools
                if (site is None or p.site == site)
                and (not spec.gpu_types or p.gpu_type in spec.gpu_types)
            )
        return found

    def staging(self, job: PendingJob, site: str) -> tuple[int, float]:
        """(missing bytes, seconds to stage them) for ``job``'s dataset at ``site``."""
        spec = job.spec
        if spec.dataset is None or spec.dataset_bytes <= 0:
            return 0, 0.0
        sources = self.view.replicas.get(spec.dataset)
        if not sources or site in sources:
            return 0, 0.0
        if self._paths is None:
            self._paths = StagingPaths(self.fabric, self.view.circuit_load, self.view.down_sites)
        return spec.dataset_bytes, self._paths.staging_seconds(spec.dataset_bytes, sources, site)

    # -- decisions -----------------------------------------------------------------------------

    def try_start(self, job: PendingJob, *, allow_borrow: bool) -> str:
        """Start ``job`` on the best pool with free GPUs now.

        Returns :attr:`Outcome.STARTED`, :attr:`Outcome.HELD_BACK` (it would fit but only by
        delaying a reserved job: a shorter job of the same shape may still backfill) or
        :attr:`Outcome.BLOCKED`.
        """
        spec = job.spec
        g = spec.gpus
        w = self.config.weights
        held_back = False
        self.hold_window = 0.0
        best: tuple[float, PoolInfo, bool, int, float] | None = None
        for p in self.candidates(job):
            f = self.free[p.key]
            if f < g:
                continue
            borrowed = self.nominal_room(spec.team, p.site, p.gpu_type) < g
            if borrowed and (not allow_borrow or (p.key in self.kept and not self.at_home(job, p))):
                continue
            res = self.reservations.get(p.key)
            if res is not None and res.holds_back(
                now=self.now, gpus=g, duration=spec.duration_s, owner=not borrowed, team=spec.team
            ):
                held_back = True
                self.hold_window = max(self.hold_window, res.shadow - self.now)
                continue
            missing, staging_s = self.staging(job, p.site)
            if math.isinf(staging_s):
                continue
            score = (
                staging_s
                + w.cost_s_per_unit * p.cost_per_gpu_hour * g * spec.duration_s / 3600.0
                + (w.borrowed_penalty_s if borrowed else 0.0)
                + w.packing_s * (f - g) / max(self.count[p.key], 1)
            )
            if best is None or score < best[0]:
                best = (score, p, borrowed, missing, staging_s)
        if best is not None:
            score, p, borrowed, missing, staging_s = best
            res = self.reservations.get(p.key)
            if res is not None:
                res.consume(now=self.now, gpus=g, duration=spec.duration_s)
            self._commit(
                job,
                (SitePart(site=p.site, gpu_type=p.gpu_type, gpus=g),),
                borrowed,
                missing=missing,
                staging_s=staging_s,
                score=score,
            )
            return Outcome.STARTED
        if spec.max_sites > 1 and self._try_span(job, allow_borrow=allow_borrow):
            return Outcome.STARTED
        return Outcome.HELD_BACK if held_back else Outcome.BLOCKED

    def _try_span(self, job: PendingJob, *, allow_borrow: bool) -> bool:
        """Place a multi-site gang over the fewest sites with free GPUs of one type (a pool
        a reservation holds only if the gang would not delay the holder there)."""
        spec = job.spec
        by_type: dict[str, list[PoolInfo]] = defaultdict(list)
        for p in self.candidates(job):
            res = self.reservations.get(p.key)
            if self.free[p.key] > 0 and (
                res is None
                or res.allows(
                    now=self.now, gpus=min(self.free[p.key], spec.gpus), duration=spec.duration_s
                )
            ):
                by_type[p.gpu_type].append(p)
        options: list[tuple[bool, int, list[SitePart]]] = []
        for gpu_type, pools in by_type.items():
            pools.sort(key=lambda p: -self.free[p.key])
            parts: list[SitePart] = []
            left = spec.gpus
            for p in pools[: spec.max_sites]:
                take = min(self.free[p.key], left)
                parts.append(SitePart(site=p.site, gpu_type=gpu_type, gpus=take))
                left -= take
                if left == 0:
                    borrowed = any(
                        self.nominal_room(spec.team, part.site, gpu_type) < spec.gpus
                        for part in parts
                    )
                    if allow_borrow or not borrowed:
                        options.append((borrowed, len(parts), parts))
                    break
        if not options:
            return False
        borrowed, _, parts = min(options, key=lambda o: (o[0], o[1]))
        for part in parts:
            res = self.reservations.get((part.site, part.gpu_type))
            if res is not None:
                res.consume(now=self.now, gpus=part.gpus, duration=spec.duration_s)
        self._commit(job, tuple(parts), borrowed, missing=0, staging_s=0.0, score=0.0)
        return True

    def _commit(
        self,
        job: PendingJob,
        parts: tuple[SitePart, ...],
        borrowed: bool,
        *,
        missing: int,
        staging_s: float,
        score: float,
    ) -> None:
        spec = job.spec
        for part in parts:
            self.free[(part.site, part.gpu_type)] -= part.gpus
            self.total_free -= part.gpus
            if not borrowed:
                self.nominal_added[(spec.team, part.gpu_type)] += part.gpus
        self.team_added[spec.team] += spec.gpus
        self._usage_total += spec.gpus
        self.starts.append(
            Start(
                job_id=job.job_id,
                parts=parts,
                borrowed=borrowed,
                preemptible=borrowed or spec.preemptible,
                missing_bytes=missing,
                staging_s=staging_s,
                score=score,
            )
        )

    def can_borrow_now(self, job: PendingJob) -> bool:
        """Whether some pool has room for ``job`` as borrowed work right now."""
        spec = job.spec
        pools = self.candidates(job)
        if any(self._could_start_in(job, p) for p in pools):
            return True
        if spec.max_sites == 1:
            return False
        by_type: dict[str, list[int]] = defaultdict(list)
        for p in pools:
            by_type[p.gpu_type].append(self.free[p.key])
        return any(
            sum(sorted(free, reverse=True)[: spec.max_sites]) >= spec.gpus
            for free in by_type.values()
        )

    def _could_start_in(self, job: PendingJob, p: PoolInfo) -> bool:
        """Free GPUs enough, no reservation in the way, and the data can get there."""
        spec = job.spec
        if self.free[p.key] < spec.gpus or not self.reachable(job, p):
            return False
        res = self.reservations.get(p.key)
        return res is None or res.allows(now=self.now, gpus=spec.gpus, duration=spec.duration_s)

    def reachable(self, job: PendingJob, p: PoolInfo) -> bool:
        """Whether ``job``'s dataset can be staged to ``p``'s site at all."""
        return not math.isinf(self.staging(job, p.site)[1])

    def try_preempt(self, job: PendingJob) -> bool:
        """Claim GPUs for a job by preempting work that must yield to it.

        Within its guarantee a job reclaims borrowed work of other teams and pre-emptible work
        of a lower class; at its team's home site any job reclaims borrowed work of teams
        homed elsewhere (the home site's teams keep what they had alone).  Work away from
        home goes first, then what costs least (``may_preempt`` and ``rank_victims`` in
        ``_preemption``).  A gang no single pool holds reclaims over several
        (:func:`preempt_for_gang`).
        """
        spec = job.spec
        if not self.config.quotas or spec.preemptible:
            return False
        g = spec.gpus
        home = self.home(spec.team)
        best: tuple[float, PoolInfo, VictimChoice | None, bool] | None = None
        for p in self.candidates(job):
            owner = self.nominal_room(spec.team, p.site, p.gpu_type) >= g
            if not (owner or p.site == home) or not self.reachable(job, p):
                continue
            res = self.reservations.get(p.key)
            if res is not None and res.holds_back(
                now=self.now, gpus=g, duration=spec.duration_s, owner=owner, team=spec.team
            ):
                continue  # the GPUs it would free are held for a job that waits longer
            have = self.free[p.key] + self.draining[p.key]
            if have < g and self.frees_within_grace(p, have, g):
                return False  # waiting costs no more than preempting would: reserve instead
            if have >= g:
                choice: VictimChoice | None = None
                lost = 0.0
            else:
                if self.ledger.victim_gpus.get(p.key, 0) < g - have:
                    continue
                claim = (p.key, owner, p.site == home, int(spec.priority), spec.team)
                if self._unmet.get(claim, g + 1) <= g - have:
                    continue  # a smaller claim of this kind already found too few victims
                choice = choose_victims(
                    self.ranked(p.key),
                    need=g - have,
                    priority=int(spec.priority),
                    owner=owner,
                    home=p.site == home,
                    team=spec.team,
                    taken=self.taken,
                )
                if choice is None:
                    self._unmet[claim] = g - have
                    continue
                lost = choice.lost_gpu_s
            if best is None or lost < best[0]:
                best = (lost, p, choice, owner)
        if best is None:
            # A gang that no single pool can hold reclaims over several (same rules).
            return spec.max_sites > 1 and preempt_for_gang(self, job)
        _, p, choice, owner = best
        from_free = min(self.free[p.key], g)
        self.free[p.key] -= from_free
        self.total_free -= from_free
        from_draining = min(self.draining[p.key], g - from_free)
        self.draining[p.key] -= from_draining
        if owner:
            self.nominal_added[(spec.team, p.gpu_type)] += g
        for victim in choice.victims if choice else ():
            self.taken.add(victim.job_id)
            if not victim.borrowed:
                reason = f"pre-empted by higher-priority job {job.job_id}"
            elif owner:
                reason = "borrowed GPUs reclaimed by their owner"
            else:
                reason = f"GPUs of {p.site} reclaimed by a team homed there"
            self.preempts.append(
                Preempt(job_id=victim.job_id, for_job_id=job.job_id, reason=reason)
            )
        self.waiting += 1
        return True

    def keep_home(self, job: PendingJob) -> None:
        """Lend none of the free GPUs of ``job``'s home pools this pass."""
        self.kept.update(p.key for p in self.candidates(job))

    def frees_within_grace(self, p: PoolInfo, have: int, need: int) -> bool:
        """Whether ``need`` GPUs of ``p`` free up by themselves within the grace: the
        ``have`` free or draining ones plus running jobs expected to end by then, less what a
        reservation there already holds.  A job past its expected end may run on for long:
        it does not count."""
        res = self.reservations.get(p.key)
        need += res.gpus if res is not None else 0
        by = self.now + self.config.grace_s
        for end, _, gpus in self.ledger.ends_in_pool(p.key):
            if have >= need or end > by:
                break
            if end > self.now:
                have += gpus
        return have >= need

    def ranked(self, pool: PoolKey) -> tuple[Victim, ...]:
        """The pool's pre-emptible allocations in the order they yield (ranked once a pass)."""
        found = self._victim_ranks.get(pool)
        if found is None:
            found = self._victim_ranks[pool] = rank_victims(
                self.ledger.in_pool(pool),
                pool=pool,
                homes=self.home,
                now=self.now,
                grace_s=self.config.grace_s,
            )
        return found

    def reserve(self, job: PendingJob) -> None:
        """Hold a blocked job's place in the pool where it can start soonest (EASY backfill).

        The expected start in each candidate pool comes from the expected ends of the jobs
        running there; the earliest wins (then the one with more GPUs free now).  A job that
        no pool could hold from completions alone (it waits on preemption) reserves nothing:
        holding GPUs for it would only leave them idle.
        """
        spec = job.spec
        if not self.config.backfill:
            return
        if spec.max_sites > 1:
            reserve_gang(self, job)
            return
        best: tuple[float, int, int, PoolInfo] | None = None  # (shadow, -free, extra, pool)
        for p in self.candidates(job):
            if self.count[p.key] < spec.gpus or p.key in self.reservations:
                continue
            if not self.reachable(job, p):
                continue
            free = self.free[p.key]
            shadow, extra = shadow_time(
                self.ledger, p.key, free_now=free, need=spec.gpus, now=self.now
            )
            if not math.isinf(shadow) and (best is None or (shadow, -free) < best[:2]):
                best = (shadow, -free, extra, p)
        if best is not None:
            shadow, _, extra, p = best
            self.reservations[p.key] = Reservation(
                pool=p.key,
                gpus=spec.gpus,
                shadow=shadow,
                extra=extra,
                guaranteed=self.nominal_room(spec.team, p.site, p.gpu_type) >= spec.gpus,
                team=spec.team,
            )
