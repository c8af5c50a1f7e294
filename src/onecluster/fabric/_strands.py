"""What a change of fabric would strand (pure): work the new fabric leaves with nowhere to be.

A change is refused (:class:`~onecluster.errors.ConflictError`, naming the jobs, attempts
and transfers) when it would

- remove a site, or a pool, where attempts are active (running, starting or stopping);
- shrink a pool below the GPUs its active attempts hold;
- remove a team that has pending or running jobs;
- make a pending job impossible that was possible before: no GPU type it accepts left, no
  pool (or ``max_sites`` pools) of those types big enough, or its dataset no longer declared
  and never registered;
- remove a site that an active transfer comes from or goes to, or a circuit that one
  carries.

Draining the site or pool first (``onecluster drain``) lets its running work finish while
nothing new lands there; then the change goes through.  Work the change does not touch never
blocks it (a pool that grows, a site added, a circuit's RTT corrected).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from onecluster.errors import ConflictError
from onecluster.model import Fabric

__all__ = [
    "ActiveAttempt",
    "ActiveTransfer",
    "PendingWork",
    "Strand",
    "Workload",
    "refusal",
    "stranded",
]

#: How many ids a strand names before it says "and N more".
_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class ActiveAttempt:
    """An attempt holding GPUs (running, starting or stopping)."""

    attempt_id: str
    job_id: str
    team: str
    site: str
    gpu_type: str
    gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingWork:
    """A job waiting in the queue, as far as placement goes."""

    job_id: str
    team: str
    gpus: int
    gpu_types: tuple[str, ...] = ()
    max_sites: int = 1
    dataset: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActiveTransfer:
    """A transfer not ended yet, and the circuits its paths last carried it over."""

    transfer_id: str
    src: str
    dst: str
    circuits: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """Everything a change of fabric must not strand; ``registered``: datasets registered
    with ``onecluster dataset add`` (they need no fabric entry)."""

    attempts: tuple[ActiveAttempt, ...] = ()
    pending: tuple[PendingWork, ...] = ()
    transfers: tuple[ActiveTransfer, ...] = ()
    registered: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class Strand:
    """One reason a change would strand work: what (``site tokyo``), why (a sentence naming
    the work) and the ids of that work."""

    subject: str
    reason: str
    ids: tuple[str, ...]


def stranded(old: Fabric, new: Fabric, work: Workload) -> tuple[Strand, ...]:
    """Everything turning ``old`` into ``new`` would strand; empty when the change is safe."""
    found: list[Strand] = []
    found += _sites_and_pools(old, new, work.attempts)
    found += _teams(old, new, work)
    found += _pending(old, new, work)
    found += _transfers(old, new, work.transfers)
    return tuple(found)


def refusal(strands: Sequence[Strand]) -> ConflictError:
    """The error that refuses a change stranding ``strands`` (at least one)."""
    msg = "the new fabric would strand work: " + "; ".join(s.reason for s in strands)
    hint = (
        "drain a site or pool first (`onecluster drain SITE [--pool GPU_TYPE]`) and let its "
        "work finish, or cancel the jobs named; then apply again (`onecluster fabric apply "
        "--dry-run` lists what stands in the way)"
    )
    return ConflictError(msg, hint=hint)


def _named(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def _listing(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    more = len(ids) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _attempts(found: Sequence[ActiveAttempt]) -> str:
    return _listing([f"{a.attempt_id} ({a.gpus} {a.gpu_type}, job {a.job_id})" for a in found])


def _sites_and_pools(old: Fabric, new: Fabric, attempts: Sequence[ActiveAttempt]) -> list[Strand]:
    by_site: dict[str, list[ActiveAttempt]] = defaultdict(list)
    by_pool: dict[tuple[str, str], list[ActiveAttempt]] = defaultdict(list)
    for a in attempts:
        by_site[a.site].append(a)
        by_pool[(a.site, a.gpu_type)].append(a)
    found: list[Strand] = []
    for site in old.sites:
        there = by_site.get(site.name, [])
        if there and not new.has_site(site.name):
            found.append(
                Strand(
                    subject=f"site {site.name}",
                    reason=f"site {site.name} is removed but {len(there)} attempt(s) hold GPUs "
                    f"there: {_attempts(there)}; drain it (`onecluster drain {site.name}`) and "
                    "let them finish first",
                    ids=_named(a.job_id for a in there),
                )
            )
            continue
        if not there:
            continue
        kept = new.site(site.name)
        for pool in site.pools:
            in_pool = by_pool.get((site.name, pool.gpu_type), [])
            held = sum(a.gpus for a in in_pool)
            after = kept.pool(pool.gpu_type)
            name = f"{site.name}/{pool.gpu_type}"
            drain = f"`onecluster drain {site.name} --pool {pool.gpu_type}`"
            if not in_pool:
                continue
            if after is None:
                reason = (
                    f"pool {name} is removed but {len(in_pool)} attempt(s) hold {held} of its "
                    f"GPUs: {_attempts(in_pool)}; drain it ({drain}) and let them finish first"
                )
            elif after.count < held and after.count < pool.count:
                reason = (
                    f"pool {name} shrinks to {after.count} GPUs but {held} are in use: "
                    f"{_attempts(in_pool)}; drain it ({drain}) until at most {after.count} "
                    "are in use"
                )
            else:
                continue
            found.append(
                Strand(subject=f"pool {name}", reason=reason, ids=_named(a.job_id for a in in_pool))
            )
    return found


def _teams(old: Fabric, new: Fabric, work: Workload) -> list[Strand]:
    found: list[Strand] = []
    for team in old.teams:
        if new.team(team.name) is not None:
            continue
        running = _named(a.job_id for a in work.attempts if a.team == team.name)
        pending = _named(j.job_id for j in work.pending if j.team == team.name)
        if not running and not pending:
            continue
        parts = []
        if running:
            parts.append(f"running job(s) {_listing(running)}")
        if pending:
            parts.append(f"pending job(s) {_listing(pending)}")
        found.append(
            Strand(
                subject=f"team {team.name}",
                reason=f"team {team.name} is removed but has {' and '.join(parts)}; let them "
                "finish or cancel them (`onecluster cancel ID`) first",
                ids=running + pending,
            )
        )
    return found


def _pending(old: Fabric, new: Fabric, work: Workload) -> list[Strand]:
    found: list[Strand] = []
    for job in work.pending:
        if new.team(job.team) is None:
            continue  # said with its team
        why = _impossible(new, job, work.registered)
        if why is None or _impossible(old, job, work.registered) is not None:
            continue  # fine, or it could not run before either: not this change's doing
        found.append(
            Strand(
                subject=f"job {job.job_id}",
                reason=f"pending job {job.job_id} (team {job.team}) could never run: {why}; "
                "cancel it or keep what it needs",
                ids=(job.job_id,),
            )
        )
    return found


def _impossible(fabric: Fabric, job: PendingWork, registered: frozenset[str]) -> str | None:
    """Why ``fabric`` could never run ``job`` (``None``: it could)."""
    if (
        job.dataset is not None
        and fabric.dataset(job.dataset) is None
        and job.dataset not in registered
    ):
        return f"its dataset {job.dataset} is neither declared in the fabric nor registered"
    have = fabric.gpu_types
    types = [t for t in job.gpu_types if t in have] if job.gpu_types else sorted(have)
    if not types:
        return f"no site has GPUs of the types it accepts ({', '.join(job.gpu_types)})"
    best = 0
    for gpu_type in types:
        sizes = sorted(
            (p.count for s in fabric.sites for p in s.pools if p.gpu_type == gpu_type),
            reverse=True,
        )
        best = max(best, sum(sizes[: job.max_sites]))
    if job.gpus > best:
        where = "one site" if job.max_sites == 1 else f"{job.max_sites} sites"
        return f"it asks for {job.gpus} GPUs and at most {best} of its types fit in {where}"
    return None


def _transfers(old: Fabric, new: Fabric, transfers: Sequence[ActiveTransfer]) -> list[Strand]:
    found: list[Strand] = []
    for site in old.site_names:
        if new.has_site(site):
            continue
        moving = _named(t.transfer_id for t in transfers if site in (t.src, t.dst))
        if moving:
            found.append(
                Strand(
                    subject=f"site {site}",
                    reason=f"site {site} is removed but transfer(s) {_listing(moving)} come "
                    "from or go to it; let them finish or cancel them (`onecluster transfers "
                    "cancel ID`) first",
                    ids=moving,
                )
            )
    kept = {c.name for c in new.circuits}
    for circuit in old.circuits:
        if circuit.name in kept:
            continue
        moving = _named(t.transfer_id for t in transfers if circuit.name in t.circuits)
        if moving:
            found.append(
                Strand(
                    subject=f"circuit {circuit.name}",
                    reason=f"circuit {circuit.name} is removed but transfer(s) "
                    f"{_listing(moving)} use it; let them finish or cancel them first",
                    ids=moving,
                )
            )
    return found
