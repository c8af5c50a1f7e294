"""The reconcile loop: level-triggered, each phase idempotent, timed and isolated.

Every pass (1) marks sites whose agent went silent as down, losing their attempts and
requeuing their jobs; re-judges circuits whose probe results went stale; (2) builds the
scheduler's view from the database and, with the pending queue kept by
:class:`PendingMirror`, asks :meth:`Scheduler.plan`; (3) applies the plan in one transaction;
(4) stages the datasets of attempts that wait for them (:mod:`onecluster.server._staging`);
(5) moves exports on: de-identified → written to the register → sent → ended
(:mod:`onecluster.server._exports`).
A phase that fails is logged and counted; the loop goes on with the next phase and the next
pass.

With several server replicas on one database, only the leader reconciles (:class:`Election`):
:meth:`Reconciler.run` passes while this replica leads, and every write of a pass is fenced
with its term, so that the database refuses it once another replica has taken over.  A
replica that takes office starts as if the server had just started: sites get one lease from
then to sync before they can expire, and the pending queue is read afresh.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from onecluster.errors import NotLeaderError, PlatformError
from onecluster.scheduler import Plan
from onecluster.server._control import ControlPlane
from onecluster.server._election import Election
from onecluster.server._metrics import ServerMetrics
from onecluster.server._scheduling import scheduler_view
from onecluster.server._staging import stage_attempts
from onecluster.store import PlacedPart, PreemptOrder, StartOrder, fenced

__all__ = ["ReconcileStats", "Reconciler"]

_log = logging.getLogger("onecluster.reconcile")

T = TypeVar("T")

#: How often a replica that does not lead looks whether it does now.
_FOLLOWER_LOOK_S = 0.05
#: How often every replica looks, at the least, for a fabric applied at another one.
_FABRIC_LOOK_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileStats:
    """A snapshot of the loop's counters; ``phase_s`` holds each phase's last duration."""

    passes: int = 0
    errors: int = 0
    started: int = 0
    preempted: int = 0
    sites_down: int = 0
    phase_s: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


class Reconciler:
    """Drives the cluster towards the scheduler's plan; owned by the app's lifespan.

    :meth:`step` runs one pass synchronously (tests call it directly); :meth:`run` repeats
    it every ``reconcile_interval_s`` until cancelled, while ``election`` (if any) says this
    replica leads.  Passes never overlap.  ``metrics`` (if any) observes each pass's and
    each phase's duration, and the phases that failed.
    """

    def __init__(
        self,
        control: ControlPlane,
        election: Election | None = None,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._control = control
        self._election = election
        self._metrics = metrics
        self._office: int | None = None  # the term of the last pass
        self._fabric_due = 0.0  # when to look for a fabric applied elsewhere (monotonic)
        # Sites whose leases ran out while no server was up are not lost yet: their agents
        # get one lease from now to sync again before their sites expire.  (Safety does not
        # rest on this — every lease granted is honoured in full, see ``Store.expire_sites`` —
        # it only spares a site that could not renew while nobody could answer it.)
        self._expire_from = control.clock.now() + control.config.lease_s
        self._lock = threading.Lock()
        self._stats = ReconcileStats()

    def statistics(self) -> ReconcileStats:
        """The counters so far."""
        return self._stats

    async def run(self) -> None:
        """Reconcile forever (until the task is cancelled), while this replica leads."""
        interval = self._control.config.reconcile_interval_s
        while True:
            election = self._election
            if time.monotonic() >= self._fabric_due:  # at most once a pass, or a second
                self._fabric_due = time.monotonic() + min(interval, _FABRIC_LOOK_S)
                await asyncio.to_thread(self._refresh_fabric)
            if election is None:
                await asyncio.to_thread(self.step)
            elif (term := election.mandate()) is not None:
                await asyncio.to_thread(self._step_as_leader, election, term)
            else:  # a follower keeps no queue, and looks again soon: it may take office
                self._control.pending.stand_by()
                self._control.links.stand_by()
                self._office = None
                await asyncio.sleep(min(interval, _FOLLOWER_LOOK_S))
                continue
            await self._rest(interval, election)

    async def _rest(self, interval: float, election: Election | None) -> None:
        """Wait ``interval`` between passes, but no longer once this replica leads in a term
        it has not taken office in (it lost the lease while waiting and won it back, say):
        syncs are refused until it has, so it takes office at once, not a pass later.  A
        fabric applied at another replica is still taken within a second meanwhile."""
        ends = time.monotonic() + interval
        while (left := ends - time.monotonic()) > 0:
            await asyncio.sleep(min(left, _FOLLOWER_LOOK_S))
            if time.monotonic() >= self._fabric_due:
                self._fabric_due = time.monotonic() + min(interval, _FABRIC_LOOK_S)
                await asyncio.to_thread(self._refresh_fabric)
            if election is not None:
                term = election.mandate()
                if term is not None and term != self._office:
                    return

    def _step_as_leader(self, election: Election, term: int) -> None:
        try:
            with fenced(term, election.holder):
                if self._office != term:
                    self.take_office(term)
                    self._office = term
                self.step()
        except NotLeaderError as exc:
            _log.warning("%s; the pass stopped", exc.message)
            election.step_down(term)
            self._office = None
            self._control.links.stand_by()
        except PlatformError as exc:  # the database, taking office: the next pass tries again
            done = "took office" if self._office == term else "could not take office yet"
            _log.warning("%s in term %d: %s", done, term, exc.message)

    def _refresh_fabric(self) -> None:
        """Every replica, leader or not, takes a fabric applied elsewhere before its pass."""
        try:
            self._control.refresh_fabric()
        except Exception:  # noqa: BLE001 -- the loop must go on; the next round retries
            _log.exception("could not read the fabric in force; the next round retries")

    def take_office(self, term: int) -> None:
        """Start leading in ``term``: sites get one lease from now to sync again before they
        can expire (they could not renew while nobody led), the pending queue is read afresh
        and the link board goes on from the leader before's carry."""
        c = self._control
        c.resume_links(term)
        self._expire_from = c.clock.now() + c.config.lease_s
        c.pending.resume()

    def step(self) -> ReconcileStats:
        """One pass of every phase; returns the counters after it."""
        with self._lock:
            timings: dict[str, float] = {}
            failures: list[str] = []
            down = _phase("expire", self._expire, 0, timings, failures)
            _phase("links", self._links, None, timings, failures)
            plan = _phase("plan", self._plan, None, timings, failures)
            started, preempted = (0, 0)
            if plan is not None:
                started, preempted = _phase(
                    "apply", lambda: self._apply(plan), (0, 0), timings, failures
                )
            _phase("stage", lambda: stage_attempts(self._control.data), 0, timings, failures)
            _phase("export", self._control.exports.reconcile, 0, timings, failures)
            s = self._stats
            self._stats = replace(
                s,
                passes=s.passes + 1,
                errors=s.errors + len(failures),
                started=s.started + started,
                preempted=s.preempted + preempted,
                sites_down=s.sites_down + down,
                phase_s=MappingProxyType(timings),
            )
            if self._metrics is not None:
                self._metrics.observe_pass(timings, failures)
            return self._stats

    def _expire(self) -> int:
        c = self._control
        now = c.clock.now()
        if now < self._expire_from:
            return 0
        sites = c.store.expire_sites(now=now)
        for site in sites:
            _log.warning(
                "site %s did not renew its lease; its attempts are lost and requeued", site
            )
        return len(sites)

    def _links(self) -> None:
        c = self._control
        c.links.refresh(c.clock.now())
        c.publish_alerts()

    def _plan(self) -> Plan:
        c = self._control
        now = c.clock.now()
        # One fabric for the view and the scheduler, even if another thread swaps it now.
        with c.fabric_lock:
            view = scheduler_view(c, now)
            with c.pending.for_pass() as queue:
                return c.scheduler.plan(view, queue, now)

    def _apply(self, plan: Plan) -> tuple[int, int]:
        if not plan.starts and not plan.preemptions:
            return 0, 0
        c = self._control
        starts = [
            StartOrder(
                job_id=s.job_id,
                parts=tuple(
                    PlacedPart(
                        site=p.site,
                        gpu_type=p.gpu_type,
                        gpus=p.gpus,
                        cost_per_gpu_hour=_price(c, p.site, p.gpu_type),
                    )
                    for p in s.parts
                ),
                borrowed=s.borrowed,
            )
            for s in plan.starts
        ]
        preempts = [PreemptOrder(job_id=p.job_id, reason=p.reason) for p in plan.preemptions]
        try:
            started, preempted = c.store.apply_plan(starts, preempts, now=c.clock.now())
        except BaseException:
            c.pending.invalidate()
            raise
        c.pending.started(s.job_id for s in plan.starts)
        if started < len(starts):
            c.pending.invalidate()  # some job left the queue meanwhile (e.g. cancelled)
        return started, preempted


def _phase(
    name: str,
    work: Callable[[], T],
    fallback: T,
    timings: dict[str, float],
    failures: list[str],
) -> T:
    """Run one phase, timed; a failure is logged and counted and yields ``fallback``."""
    began = time.perf_counter()
    try:
        return work()
    except NotLeaderError:
        failures.append(name)
        raise  # the pass is over: another replica leads
    except Exception:  # noqa: BLE001 -- one failing phase must never stop the loop
        failures.append(name)
        _log.exception("reconcile phase %r failed; the next pass retries it", name)
        return fallback
    finally:
        timings[name] = time.perf_counter() - began


def _price(control: ControlPlane, site: str, gpu_type: str) -> float:
    pool = control.fabric.site(site).pool(gpu_type)
    return pool.cost_per_gpu_hour if pool is not None else 0.0
