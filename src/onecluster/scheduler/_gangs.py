"""Multi-site gangs reserve and reclaim like single-pool jobs, over up to ``max_sites`` pools
of one GPU type at distinct sites.

A gang blocked for lack of GPUs reserves, in the fewest pools that will hold it soonest, the
GPUs each will give (EASY backfill per pool, as for one pool); a gang within its guarantee,
or at its team's home site, reclaims from borrowers in each pool it spans the GPUs it takes
there.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from typing import TYPE_CHECKING

from onecluster.scheduler._preemption import VictimChoice, choose_victims, may_preempt
from onecluster.scheduler._reservations import Reservation
from onecluster.scheduler._state import PendingJob, Preempt

if TYPE_CHECKING:
    from onecluster.scheduler._pass import PassState, PoolInfo

__all__ = ["preempt_for_gang", "reserve_gang"]


def _pools_by_type(state: PassState, job: PendingJob) -> dict[str, list[PoolInfo]]:
    by_type: dict[str, list[PoolInfo]] = defaultdict(list)
    for p in state.candidates(job):
        if state.reachable(job, p):
            by_type[p.gpu_type].append(p)
    return by_type


def reserve_gang(state: PassState, job: PendingJob) -> None:
    """Reserve, for a blocked gang, the pools that will hold it soonest as running jobs end."""
    spec = job.spec
    best: tuple[float, list[tuple[PoolInfo, int, int]]] | None = None
    for typed in _pools_by_type(state, job).values():
        free_of_holds = [p for p in typed if p.key not in state.reservations]
        found = _earliest(state, free_of_holds, spec.gpus, spec.max_sites)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        return
    shadow, shares = best
    guaranteed = all(
        state.nominal_room(spec.team, p.site, p.gpu_type) >= spec.gpus for p, _, _ in shares
    )
    for p, gpus, free_then in shares:
        state.reservations[p.key] = Reservation(
            pool=p.key,
            gpus=gpus,
            shadow=shadow,
            extra=free_then - gpus,
            guaranteed=guaranteed,
            team=spec.team,
        )


def _earliest(
    state: PassState, pools: list[PoolInfo], need: int, max_sites: int
) -> tuple[float, list[tuple[PoolInfo, int, int]]] | None:
    """When ``need`` GPUs will be free in at most ``max_sites`` of ``pools``, and each chosen
    pool's (pool, GPUs it gives, GPUs free then); ``None`` if never."""
    free = {p.key: state.free[p.key] for p in pools}
    events: list[tuple[float, int, int, int]] = []  # (end, pool index, GPUs, position)
    for i, p in enumerate(pools):
        ends = state.ledger.ends_in_pool(p.key)
        if ends:
            events.append((ends[0][0], i, ends[0][2], 0))
    heapq.heapify(events)
    at = state.now
    while True:
        ranked = sorted(pools, key=lambda p: -free[p.key])[:max_sites]
        if sum(free[p.key] for p in ranked) >= need:
            shares, left = [], need
            for p in ranked:
                take = min(free[p.key], left)
                if take > 0:
                    shares.append((p, take, free[p.key]))
                left -= take
            return max(at, state.now), shares
        if not events:
            return None
        end, i, gpus, pos = heapq.heappop(events)
        at = end
        key = pools[i].key
        free[key] += gpus
        ends = state.ledger.ends_in_pool(key)
        if pos + 1 < len(ends):
            heapq.heappush(events, (ends[pos + 1][0], i, ends[pos + 1][2], pos + 1))
        if math.isinf(at):
            return None


def preempt_for_gang(state: PassState, job: PendingJob) -> bool:
    """Claim GPUs for a gang over up to ``max_sites`` pools of one type by preempting, in
    each pool, what must yield to it there (the rules of :meth:`PassState.try_preempt`)."""
    spec = job.spec
    home = state.home(spec.team)
    g = spec.gpus
    best: tuple[float, list[tuple[PoolInfo, int, VictimChoice | None, bool]]] | None = None
    for pools in _pools_by_type(state, job).values():
        options = []
        for p in pools:
            owner = state.nominal_room(spec.team, p.site, p.gpu_type) >= g
            res = state.reservations.get(p.key)
            if res is not None and res.holds_back(
                now=state.now, gpus=g, duration=spec.duration_s, owner=owner, team=spec.team
            ):
                continue
            have = state.free[p.key] + state.draining[p.key]
            claimable = 0
            if owner or p.site == home:
                claimable = _claimable(
                    state, p, int(spec.priority), owner=owner, home=p.site == home, team=spec.team
                )
            if have + claimable > 0:
                options.append((have + claimable, have, owner, p))
        options.sort(key=lambda o: -o[0])
        chosen = options[: spec.max_sites]
        if sum(o[0] for o in chosen) < g:
            continue
        plan: list[tuple[PoolInfo, int, VictimChoice | None, bool]] = []
        lost, left = 0.0, g
        for avail, have, owner, p in chosen:
            take = min(avail, left)
            left -= take
            choice = None
            if take > have:
                choice = choose_victims(
                    state.ranked(p.key),
                    need=take - have,
                    priority=int(spec.priority),
                    owner=owner,
                    home=p.site == home,
                    team=spec.team,
                    taken=state.taken,
                )
                if choice is None:
                    break
                lost += choice.lost_gpu_s
            plan.append((p, take, choice, owner))
            if left == 0:
                break
        else:
            continue
        victims = any(choice is not None for _, _, choice, _ in plan)
        if left == 0 and victims and (best is None or lost < best[0]):
            # (Free GPUs alone are for _try_span to start on, never a claim.)
            best = (lost, plan)
    if best is None:
        return False
    for p, take, choice, owner in best[1]:
        from_free = min(state.free[p.key], take)
        state.free[p.key] -= from_free
        state.total_free -= from_free
        state.draining[p.key] -= min(state.draining[p.key], take - from_free)
        if owner:
            state.nominal_added[(spec.team, p.gpu_type)] += take
        for victim in choice.victims if choice else ():
            state.taken.add(victim.job_id)
            reason = (
                f"pre-empted by higher-priority job {job.job_id}"
                if not victim.borrowed
                else f"GPUs of {p.site} reclaimed for gang {job.job_id}"
            )
            state.preempts.append(
                Preempt(job_id=victim.job_id, for_job_id=job.job_id, reason=reason)
            )
    state.waiting += 1
    return True


def _claimable(
    state: PassState, p: PoolInfo, priority: int, *, owner: bool, home: bool, team: str
) -> int:
    """GPUs of ``p`` this claimant could free by preemption (victims not yet taken)."""
    if not state.ledger.victim_gpus.get(p.key, 0):
        return 0
    return sum(
        v.gpus_here
        for v in state.ranked(p.key)
        if v.allocation.job_id not in state.taken
        and may_preempt(v, priority, owner=owner, home=home, team=team)
    )
