"""Choosing whom to preempt so a job within its team's quota gets its GPUs back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onecluster.scheduler._state import Allocation

__all__ = ["VictimChoice", "choose_victims"]


@dataclass(frozen=True, slots=True)
class VictimChoice:
    """Victims in one pool and the work (GPU-seconds already run) their preemption loses."""

    victims: tuple[Allocation, ...]
    lost_gpu_s: float


def may_preempt(victim: Allocation, priority: int) -> bool:
    """Borrowed work yields to anyone within quota; pre-emptible work yields to higher priority."""
    if not victim.victim_class:
        return False
    return victim.borrowed or int(victim.priority) < priority


def choose_victims(
    candidates: Iterable[Allocation],
    *,
    pool: tuple[str, str],
    need: int,
    priority: int,
    now: float,
    taken: set[str],
) -> VictimChoice | None:
    """The cheapest set of allocations in ``pool`` that frees ``need`` GPUs, or ``None``.

    Order: borrowed work first (the lender is reclaiming), then lowest priority, then the most
    recently started (it has lost least).  ``taken`` holds victims already chosen this pass.
    """
    eligible = [a for a in candidates if a.job_id not in taken and may_preempt(a, priority)]
    eligible.sort(key=lambda a: (not a.borrowed, int(a.priority), -a.started_at))
    chosen: list[Allocation] = []
    freed = 0
    lost = 0.0
    for a in eligible:
        if freed >= need:
            break
        gpus_here = sum(p.gpus for p in a.parts if (p.site, p.gpu_type) == pool)
        chosen.append(a)
        freed += gpus_here
        lost += a.gpus * max(now - a.started_at, 0.0)
    if freed < need:
        return None
    return VictimChoice(tuple(chosen), lost)
