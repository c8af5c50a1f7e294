"""Choosing whom to preempt so that a job gets the GPUs it is guaranteed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from onecluster.model import kept_after
from onecluster.scheduler._state import Allocation

__all__ = ["Victim", "VictimChoice", "choose_victims", "lost_gpu_s", "rank_victims"]


@dataclass(frozen=True, slots=True)
class VictimChoice:
    """Victims in one pool and the work (GPU-seconds) their preemption throws away."""

    victims: tuple[Allocation, ...]
    lost_gpu_s: float


@dataclass(frozen=True, slots=True)
class Victim:
    """An allocation that something may preempt, with what that would cost."""

    allocation: Allocation
    away: bool  # its team is homed elsewhere than the ranked pool's site
    gpus_here: int  # its GPUs in the pool being ranked
    lost_gpu_s: float


def lost_gpu_s(a: Allocation, now: float) -> float:
    """GPU-seconds of work that preempting ``a`` at ``now`` throws away (its checkpoints kept)."""
    ran = max(now - a.started_at, 0.0)
    return a.gpus * (ran - kept_after(ran, a.checkpoint_interval_s, a.checkpoint_on_sigterm))


def rank_victims(
    allocations: Iterable[Allocation],
    *,
    pool: tuple[str, str],
    homes: Callable[[str], str | None],
    now: float,
    grace_s: float,
) -> tuple[Victim, ...]:
    """The pre-emptible allocations of ``pool`` in the order they yield.

    Borrowed work first (the lender is reclaiming), work away from its team's home site
    (``homes``) before work at home, then the lowest priority, then what preempting it
    costs: the work it loses (checkpoints count) plus its GPUs idle through the grace — so a
    fresh 128-GPU gang is not stopped to free one GPU; at equal cost, the one that would
    hold its GPUs longest (a job about to end frees them anyway).  A pass ranks a pool once
    and every claimant walks the same list.  (Written for speed: a busy pass ranks hundreds.)
    """
    site = pool[0]
    keyed: list[tuple[bool, bool, int, float, float, int]] = []
    found: list[Victim] = []
    for a in allocations:
        if not (a.borrowed or a.preemptible) or a.draining:
            continue
        parts = a.parts
        # Away *here*: its team is homed elsewhere than this pool's site (a gang spanning
        # its home site and another is at home in its home site's pool).
        away = site != homes(a.team)
        if len(parts) == 1:
            gpus = here = parts[0].gpus
        else:
            gpus = sum(p.gpus for p in parts)
            here = sum(p.gpus for p in parts if (p.site, p.gpu_type) == pool)
        ran = now - a.started_at if now > a.started_at else 0.0
        if a.checkpoint_interval_s is None and not a.checkpoint_on_sigterm:
            lost = gpus * ran
        else:
            lost = gpus * (ran - kept_after(ran, a.checkpoint_interval_s, a.checkpoint_on_sigterm))
        cost = lost + gpus * grace_s
        keyed.append((not a.borrowed, not away, int(a.priority), cost, -a.expected_end, len(found)))
        found.append(Victim(allocation=a, away=away, gpus_here=here, lost_gpu_s=lost))
    keyed.sort()
    return tuple(found[k[5]] for k in keyed)


def may_preempt(victim: Victim, priority: int, *, owner: bool, home: bool, team: str) -> bool:
    """Whether ``victim`` yields to a job of ``team`` at ``priority``.

    Borrowed work of another team yields to a job within its guarantee (``owner``) and, when
    its team is homed elsewhere, to any job of a team homed at the pool's site (``home``).
    A team never reclaims from itself: its borrowed work and its new job would only trade
    places.  Pre-emptible work yields to higher priority, but only to a job within its
    guarantee: a job beyond it would start borrowed, after every in-guarantee job, so the GPUs
    it freed would go back to its victim and the victim would be preempted again, forever
    (found by the control plane's property test).
    """
    a = victim.allocation
    if a.borrowed and a.team != team and (owner or (home and victim.away)):
        return True
    return owner and a.preemptible and int(a.priority) < priority


def choose_victims(
    ranked: Sequence[Victim],
    *,
    need: int,
    priority: int,
    owner: bool,
    home: bool,
    team: str,
    taken: set[str],
) -> VictimChoice | None:
    """The first victims of ``ranked`` (:func:`rank_victims`) that free ``need`` GPUs and
    may be preempted by this claimant, or ``None``.  ``taken`` holds victims already chosen
    this pass."""
    chosen: list[Allocation] = []
    freed = 0
    lost = 0.0
    for v in ranked:
        if freed >= need:
            break
        if v.allocation.job_id in taken or not may_preempt(
            v, priority, owner=owner, home=home, team=team
        ):
            continue
        chosen.append(v.allocation)
        freed += v.gpus_here
        lost += v.lost_gpu_s
    if freed < need:
        return None
    return VictimChoice(tuple(chosen), lost)
