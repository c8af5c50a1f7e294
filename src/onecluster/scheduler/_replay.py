"""A scheduling pass replayed with a trace of one job (for :func:`explain`).

The replay runs the very code of :meth:`Scheduler.plan` on a :class:`PassState` that also
records what it does with one job and which job holds each backfill reservation:
reservations live only inside a pass, so replaying it is the only way to name their holders.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from onecluster.scheduler._ledger import AllocationLedger, PoolKey
from onecluster.scheduler._pass import Outcome, PassState
from onecluster.scheduler._queue import PendingQueue
from onecluster.scheduler._scheduler import Scheduler, _serve_fair, _serve_fifo
from onecluster.scheduler._state import ClusterView, PendingJob

__all__ = ["TracedPass", "pass_state", "replay"]

_S = TypeVar("_S", bound=PassState)


class TracedPass(PassState):
    """A pass that records what it does with one job, and who holds each reservation."""

    #: The job traced.
    target: str
    #: Pool → the job that reserved it.
    holders: dict[PoolKey, str]
    #: What happened to the target, in order: try_start outcomes, ``DEFERRED`` when it
    #: could borrow, ``WAITING`` when it claimed GPUs by preemption.
    events: list[str]
    #: Holders of the reservations that kept it out of free GPUs.
    held_for: set[str]
    #: The pools it reserved (several for a gang over several sites).
    own: list[PoolKey]
    #: Every job the pass tried → the outcome of its last try.
    tried: dict[str, str]
    #: Pool → the target's room within its guarantee there when the pass first tried it.
    rooms: dict[PoolKey, float] | None

    def trace(self, job_id: str) -> None:
        """Record what happens to ``job_id`` from now on (call before the pass)."""
        self.target, self.own, self.rooms = job_id, [], None
        self.holders, self.events, self.held_for, self.tried = {}, [], set(), {}

    def try_start(self, job: PendingJob, *, allow_borrow: bool) -> str:
        if job.job_id == self.target and self.rooms is None:
            team = job.spec.team
            self.rooms = {p.key: self.nominal_room(team, p.site, p.gpu_type) for p in self.pools}
        outcome = super().try_start(job, allow_borrow=allow_borrow)
        self.tried[job.job_id] = outcome
        if job.job_id == self.target:
            self.events.append(outcome)
            if outcome == Outcome.HELD_BACK:
                self.held_for.update(self._holders_in_the_way(job, allow_borrow=allow_borrow))
        return outcome

    def can_borrow_now(self, job: PendingJob) -> bool:
        found = super().can_borrow_now(job)
        if found and job.job_id == self.target:
            self.events.append(Outcome.DEFERRED)
        return found

    def try_preempt(self, job: PendingJob) -> bool:
        claimed = super().try_preempt(job)
        if claimed and job.job_id == self.target:
            self.events.append(Outcome.WAITING)
        return claimed

    def reserve(self, job: PendingJob) -> None:
        before = set(self.reservations)
        super().reserve(job)
        for key in self.reservations.keys() - before:
            self.holders[key] = job.job_id
            if job.job_id == self.target:
                self.own.append(key)

    def _holders_in_the_way(self, job: PendingJob, *, allow_borrow: bool) -> Iterable[str]:
        """Holders of the reservations that kept ``job`` out of pools with room for it (the
        tests of :meth:`PassState.try_start`, in its order)."""
        g = job.spec.gpus
        for p in self.candidates(job):
            res = self.reservations.get(p.key)
            if res is None or self.free[p.key] < g:
                continue
            borrowed = self.nominal_room(job.spec.team, p.site, p.gpu_type) < g
            if borrowed and (not allow_borrow or (p.key in self.kept and not self.at_home(job, p))):
                continue
            if not res.allows(now=self.now, gpus=g, duration=job.spec.duration_s):
                yield self.holders.get(p.key, "?")


def pass_state(
    kind: type[_S], scheduler: Scheduler, ledger: AllocationLedger, view: ClusterView, now: float
) -> _S:
    """A pass state on the inputs of :meth:`Scheduler.plan`, as it builds its own."""
    return kind(
        fabric=scheduler.fabric,
        config=scheduler.config,
        pools=scheduler._pools,
        guarantees=scheduler.guarantees,
        ledger=ledger,
        view=scheduler.with_drains(view),
        now=now,
    )


def replay(
    scheduler: Scheduler,
    ledger: AllocationLedger,
    view: ClusterView,
    queue: PendingQueue,
    now: float,
    *,
    job_id: str,
) -> TracedPass:
    """The pass of :meth:`Scheduler.plan`, traced."""
    state = pass_state(TracedPass, scheduler, ledger, view, now)
    state.trace(job_id)
    if len(queue) and not state.exhausted():
        if scheduler.config.kind == "fifo":
            _serve_fifo(state, queue)
        else:
            _serve_fair(state, queue)
    return state
