"""``GET /jobs/{id}/why``: why a pending job waits, and what it waits behind.

The body is the scheduler's explanation on the wire (``docs/cli.md``, "Why does my job
wait?").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from onecluster.schema._jobs import PartOut, PriorityName

__all__ = [
    "GuaranteeOut",
    "PoolWhyOut",
    "PoolWhyStatus",
    "PoolWhyTerms",
    "ReclaimOut",
    "ReservedOut",
    "TeamAheadOut",
    "WhyOut",
    "WhyVerdict",
]

#: What this pass does with the job (see :class:`WhyOut`).
WhyVerdict = Literal[
    "starts", "reclaims", "claims", "reserved", "held_back", "deferred", "blocked", "not_reached"
]
#: Within the team's guarantee (``quota``), beyond it at the team's home site (``home``),
#: beyond it elsewhere (``borrowed``), or no quotas under the policy (``open``).
PoolWhyTerms = Literal["quota", "home", "borrowed", "open"]
#: ``closed``: the site is up but its cluster takes no new work; ``down``: nothing runs there.
PoolWhyStatus = Literal["up", "closed", "down"]


class TeamAheadOut(BaseModel):
    """A team whose pending jobs of the same class are served first: the priority of its
    first job ahead, and how many jobs (and GPUs) it has ahead."""

    team: str
    priority: float
    jobs: int
    gpus: int


class GuaranteeOut(BaseModel):
    """The team's guarantee of one GPU type (``site``: ``null`` at any site, else only
    there); ``used``: held within it now; ``borrowed``: held beyond it now."""

    gpu_type: str
    site: str | None
    gpus: int
    used: int
    borrowed: int


class ReservedOut(BaseModel):
    """A backfill reservation: ``job_id`` gets ``gpus`` GPUs of the pool first, expected
    at ``start_at``."""

    job_id: str
    gpus: int
    start_at: float


class PoolWhyOut(BaseModel):
    """A pool the job may use: ``free`` when the pass begins, ``left`` once it has placed what
    it places, ``draining`` (being freed), ``borrowed`` (held by work beyond its team's
    guarantee), the reservation there, the ``terms`` it would run on, whether enough GPUs
    free up by themselves within the preemption grace (it waits rather than preempt), and
    the job's dataset: ``staging_bytes`` missing, ``staging_s`` to bring them (``null``: the
    data cannot get there)."""

    site: str
    gpu_type: str
    status: PoolWhyStatus
    gpus: int
    free: int
    left: int
    draining: int
    borrowed: int
    reserved: ReservedOut | None
    terms: PoolWhyTerms
    frees_within_grace: bool
    staging_bytes: int
    staging_s: float | None


class ReclaimOut(BaseModel):
    """A running job this pass preempts so that the job gets its GPUs."""

    job_id: str
    team: str
    site: str
    gpus: int
    reason: str


class WhyOut(BaseModel):
    """Why a pending job waits (times are epoch seconds).

    Fair share: ``priority = usage_weight × fair_factor + age_weight × age_factor``.
    ``ahead``: pending jobs served before it (``ahead_higher_class`` of a higher class,
    ``ahead_same_class`` of its class with a higher priority); ``teams_ahead``: the first
    few teams among them.  ``verdict``: what this pass does with it: ``starts`` (on
    ``starts``), ``reclaims`` (preempts ``reclaims``, starts once they have left),
    ``claims`` (GPUs being freed already), ``reserved`` (the next GPUs to free at
    ``reserved``, by ``expected_start_at``), ``held_back`` (it fits, but would delay
    the reserved jobs ``held_for``), ``deferred`` (it could only borrow idle GPUs, and
    in-quota work took them), ``blocked`` (too few free GPUs where it may run) or
    ``not_reached`` (the pass ran out of GPUs before it, or its team's older job ``behind``
    of the same shape did not fit, and a pass tries none behind such a job).  ``summary``:
    one line in words.
    """

    job_id: str
    team: str
    gpus: int
    gpu_types: list[str]
    priority_class: PriorityName
    policy: str
    now: float
    waited_s: float
    usage_gpus: float
    weight: float
    fair_factor: float
    age_factor: float
    priority: float
    pending: int
    ahead: int
    ahead_higher_class: int
    ahead_same_class: int
    teams_ahead: list[TeamAheadOut]
    home_site: str | None
    guarantee: list[GuaranteeOut]
    pools: list[PoolWhyOut]
    verdict: WhyVerdict
    starts: list[PartOut]
    borrowed: bool
    reclaims: list[ReclaimOut]
    held_for: list[str]
    behind: str | None
    reserved: list[PartOut]
    expected_start_at: float | None
    grace_s: float
    summary: str
