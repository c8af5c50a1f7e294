"""The one line of an :class:`~onecluster.scheduler.Explanation`: what this pass does with a
pending job and why it waits, in plain words (``onecluster jobs ID --why``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onecluster.scheduler._explain import Explanation

__all__ = ["summarize"]


def summarize(e: Explanation) -> str:
    """One line in plain words: what this pass does with the job, and why it waits."""
    if e.verdict == "starts":
        where = " + ".join(f"{p.gpus} {p.gpu_type} at {p.site}" for p in e.starts)
        borrowed = " as borrowed work (beyond its guarantee, pre-emptible)" if e.borrowed else ""
        return f"starts in this pass on {where}{borrowed}"
    said = [_line(e)]
    if e.verdict == "reclaims":
        said.append(_reclaiming(e))
        return "; ".join(said)
    if e.verdict == "claims":
        said.append("it has claimed GPUs that are being freed now and starts once they are")
        return "; ".join(said)
    said.append(_room(e))
    said.extend(_terms_said(e))
    if e.reservations and e.expected_start_at is not None:
        held = " and ".join(f"{r.gpus} {r.gpu_type} at {r.site}" for r in e.reservations)
        said.append(
            f"the next {held} to free are reserved for it "
            f"(expected {_after(e.expected_start_at - e.now)})"
        )
    for status, words in (("down", "down"), ("closed", "taking no new work")):
        shut = {p.site for p in e.pools if p.status == status}
        if shut:
            said.append(f"{_names(shut)} {'is' if len(shut) == 1 else 'are'} {words}")
    return "; ".join(s for s in said if s)


def _reclaiming(e: Explanation) -> str:
    """What it preempts, on what terms."""
    sites = sorted({r.site for r in e.reclaims})
    gpus = sum(r.gpus for r in e.reclaims)
    jobs = len({r.job_id for r in e.reclaims})
    terms = {p.site: p.terms for p in e.pools}
    where = _names(sites)
    if all(terms.get(site) == "quota" for site in sites):
        what = f"within its guarantee it reclaims {gpus} borrowed GPUs at {where}"
    elif all(terms.get(site) == "home" for site in sites):
        what = f"at its home site it reclaims {gpus} GPUs from teams homed elsewhere"
    else:
        what = f"it preempts {gpus} GPUs of lower-priority pre-emptible work at {where}"
    return (
        f"{what} ({jobs} job{'s' if jobs != 1 else ''}, {_num(e.grace_s)} s grace) and starts "
        "once they have stopped"
    )


def _line(e: Explanation) -> str:
    """Its place in line."""
    if e.ahead == 0:
        return "first in line"
    jobs = f"{e.ahead} job{'s' if e.ahead != 1 else ''}"
    if e.policy == "fifo":
        return f"waits behind {jobs} submitted before it (first come, first served)"
    why = []
    if e.ahead_higher_class:
        why.append(f"{e.ahead_higher_class} of a higher class")
    own = sum(t.jobs for t in e.teams_ahead if t.team == e.team)
    if own:
        why.append(f"{own} older of its own team")
    others = [t for t in e.teams_ahead if t.team != e.team]
    if others:
        top = others[0]
        why.append(f"team {top.team} {_num(top.priority)} vs yours {_num(e.priority)}")
    detail = f" ({'; '.join(why)})" if why else ""
    return f"waits behind {jobs}{'' if own else ' of higher priority'}{detail}"


def _room(e: Explanation) -> str:
    """Its need against the free GPUs."""
    types = "/".join(e.gpu_types) or "GPUs"
    need = f"needs {e.gpus} {types}"
    up = [p for p in e.pools if p.status == "up"]
    if e.behind is not None:
        return (
            f"{need} — its team's older job {e.behind} of the same shape could not be placed, "
            "so this pass tried none behind it"
        )
    if not up:
        return f"{need} — no site that could run it takes work now"
    best = max(up, key=lambda p: p.free)
    if best.free < e.gpus:
        where = f"at {best.site}" if len(up) == 1 else "at any site"
        return f"{need} — at most {best.free} free {where}"
    if e.verdict == "held_back":
        holders = ", ".join(e.held_for) or "another job"
        whose = "their" if len(e.held_for) > 1 else "its"
        return (
            f"{need} — enough are free, but held for {holders} (reserved), and it would run "
            f"past {whose} expected start"
        )
    if e.verdict == "deferred":
        return (
            f"{need} — beyond its guarantee it may only borrow idle GPUs, and in-quota work "
            "took them first"
        )
    if e.verdict == "not_reached":
        return f"{need} — {best.free} free at {best.site} now, taken by the jobs ahead of it"
    roomy = [p for p in up if p.free >= e.gpus]
    if all(p.staging_s is None for p in roomy):
        return f"{need} — free at {_names(p.site for p in roomy)}, but its dataset cannot get there"
    if best.terms == "borrowed":
        return f"{need} — {best.free} free at {best.site}, kept for the teams homed there"
    return f"{need} — {best.free} free at {best.site}, but not for it in this pass"


def _terms_said(e: Explanation) -> list[str]:
    """What its guarantee gives it."""
    up = [p for p in e.pools if p.status == "up"]
    owned = [p for p in up if p.terms == "quota"]
    if owned:
        if any(p.free >= e.gpus for p in owned):
            return []
        grace = f"{_num(e.grace_s)} s grace"
        theirs = [p for p in owned if p.reserved is not None and p.reserved.job_id != e.job_id]
        if theirs:
            p = theirs[0]
            holder = p.reserved.job_id if p.reserved is not None else "?"
            return [
                f"within its guarantee at {p.site}, but the GPUs there are reserved for {holder}"
            ]
        soon = [p for p in owned if p.frees_within_grace]
        if soon:
            return [
                f"within its guarantee at {_names(p.site for p in soon)}, where enough GPUs free "
                f"up within the {grace}: it waits for them rather than preempt"
            ]
        reclaimable = [p for p in owned if p.free + p.draining + p.borrowed >= e.gpus]
        if reclaimable:
            return [
                f"within its guarantee it will reclaim borrowed GPUs at {reclaimable[0].site} "
                f"({grace})"
            ]
        return [f"within its guarantee at {_names(p.site for p in owned)}; it waits for GPUs"]
    used = ", ".join(f"{g.used}/{g.gpus} {g.gpu_type}" for g in e.guarantee)
    held = f" ({used} of its guarantee in use)" if used else ""
    if any(p.terms == "home" for p in up):
        return [
            f"beyond its guarantee{held}: at its home site {e.home_site} it reclaims GPUs from "
            "teams homed elsewhere, elsewhere it only borrows idle GPUs"
        ]
    if any(p.terms == "borrowed" for p in up):
        return [f"beyond its guarantee{held}: it runs only on idle GPUs, as borrowed work"]
    return []


def _names(sites: Iterable[str]) -> str:
    return ", ".join(sorted(set(sites)))


def _num(x: float) -> str:
    """A priority or a count of seconds as people read it: ``9120``, ``0.42``."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _after(seconds: float) -> str:
    if seconds <= 0:
        return "now"
    if seconds < 60:
        return f"in {seconds:.0f} s"
    if seconds < 3600:
        return f"in {seconds / 60:.0f} min"
    if seconds < 86400:
        return f"in {seconds / 3600:.1f} h"
    return f"in {seconds / 86400:.1f} d"
