"""The scheduler: one pure decision function shared by the live server and the simulator."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Collection
from dataclasses import replace

from onecluster.model import Fabric, JobSpec
from onecluster.scheduler._admission import admit
from onecluster.scheduler._config import PolicyConfig
from onecluster.scheduler._guarantees import guarantees
from onecluster.scheduler._ledger import AllocationLedger
from onecluster.scheduler._pass import Outcome, PassState, PoolInfo
from onecluster.scheduler._queue import Bucket, BucketKey, Entry, PendingQueue
from onecluster.scheduler._state import ClusterView, PendingJob, Plan

__all__ = ["Scheduler"]


class Scheduler:
    """Decides which pending jobs start where, and what to preempt, given observed state.

    ``plan`` is a pure function of (fabric, config, view, queue, now): it does no I/O, reads
    no clock and mutates nothing it is given.  Order of service (``unified``/``separate``):
    priority class, highest first; within a class, the team whose oldest job has the highest
    fair-share priority (decayed past usage against weight, plus age: :class:`FairShare`)
    goes next; within a team, oldest first.  Quotas are guarantees (derived from home sites
    for teams without one: :func:`guarantees`).  In-quota work of every class is placed
    before any borrowed work; a blocked in-quota job preempts borrowed work (any team's) or
    pre-emptible lower-priority work; other blocked jobs
    reserve their place and smaller or shorter jobs backfill around them.  ``fifo`` serves
    strictly in submit order and stops at the first job that does not fit.

    ``drained``: pools (site, GPU type) an operator drained: every pass sees them closed
    (:attr:`ClusterView.closed_pools`), so their running work finishes and nothing new goes
    there.  They come with the fabric in force, so one swap of the scheduler changes both.
    """

    def __init__(
        self,
        fabric: Fabric,
        config: PolicyConfig | None = None,
        *,
        drained: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.fabric = fabric
        self.config = config or PolicyConfig()
        self.drained = drained
        self.guarantees = guarantees(fabric)
        self._pools = tuple(
            PoolInfo(
                key=(s.name, p.gpu_type),
                site=s.name,
                gpu_type=p.gpu_type,
                count=p.count,
                cost_per_gpu_hour=p.cost_per_gpu_hour,
            )
            for s in fabric.sites
            for p in s.pools
        )

    def admit(self, spec: JobSpec, *, datasets: Collection[str] = ()) -> None:
        """Raise :class:`~onecluster.errors.ImpossibleJobError` if ``spec`` can never run.

        ``datasets``: names registered beyond the fabric's (``onecluster dataset add``)."""
        admit(self.fabric, spec, home_only=self.config.home_only, datasets=datasets)

    def with_drains(self, view: ClusterView) -> ClusterView:
        """``view`` with the drained pools closed too."""
        if not self.drained or self.drained <= view.closed_pools:
            return view
        return replace(view, closed_pools=view.closed_pools | self.drained)

    def plan(self, view: ClusterView, queue: PendingQueue, now: float) -> Plan:
        """Decide starts and preemptions for this moment."""
        view = self.with_drains(view)
        running = view.running
        ledger = running if isinstance(running, AllocationLedger) else AllocationLedger.of(running)
        state = PassState(
            fabric=self.fabric,
            config=self.config,
            pools=self._pools,
            guarantees=self.guarantees,
            ledger=ledger,
            view=view,
            now=now,
        )
        if len(queue) and not state.exhausted():
            if self.config.kind == "fifo":
                _serve_fifo(state, queue)
            else:
                _serve_fair(state, queue)
        return Plan(
            starts=tuple(state.starts),
            preemptions=tuple(state.preempts),
            stats=state.stats(len(queue)),
        )


#: How many jobs of one bucket a pass may try and find held back (each would delay a reserved
#: job) before it gives up on the bucket (Slurm's ``bf_max_job_test`` plays the same role).
BACKFILL_DEPTH = 16
#: How far past a held-back job a pass looks for one short enough to backfill.  Only jobs
#: of the same shape follow in a bucket, so only the run time can differ: the look-ahead
#: reads run times, which costs far less than trying each job.
BACKFILL_SCAN = 256


class _Cursor:
    """Walks one bucket's live jobs in order during a pass."""

    __slots__ = ("bucket", "held_back", "index", "queue")

    def __init__(self, queue: PendingQueue, bucket: Bucket) -> None:
        self.queue = queue
        self.bucket = bucket
        self.index = bucket.start
        self.held_back = 0

    def skip_longer_than(self, window: float) -> None:
        """Move to the next live job that runs at most ``window`` seconds (or to the end)."""
        entries = self.bucket.entries
        stop = min(len(entries), self.index + BACKFILL_SCAN)
        is_live = self.queue.is_live
        index = self.index
        while index < stop:
            entry = entries[index]
            if entry[3] <= window and is_live(entry):
                self.index = index
                return
            index += 1
        self.index = len(entries)

    def head(self) -> tuple[Entry, PendingJob] | None:
        entries = self.bucket.entries
        while self.index < len(entries):
            entry = entries[self.index]
            if self.queue.is_live(entry):
                return entry, self.queue.job(entry)
            self.index += 1
        return None


def _serve_fifo(state: PassState, queue: PendingQueue) -> None:
    heap: list[tuple[Entry, BucketKey]] = []
    cursors: dict[BucketKey, _Cursor] = {}
    for b in queue.buckets():
        c = cursors[b.key] = _Cursor(queue, b)
        found = c.head()
        if found:
            heap.append((found[0], b.key))
    heapq.heapify(heap)
    while heap and state.total_free > 0:
        _, key = heapq.heappop(heap)
        c = cursors[key]
        found = c.head()
        if found is None:
            continue
        state.considered += 1
        if state.try_start(found[1], allow_borrow=True) != Outcome.STARTED:
            state.blocked += 1
            return  # strict first-come: the head blocks everyone behind it
        c.index += 1
        nxt = c.head()
        if nxt:
            heapq.heappush(heap, (nxt[0], key))


class _Phase:
    """The three rounds of a fair pass, in order."""

    QUOTA = "quota"  # work within its team's guarantee (or any work where nothing is borrowed)
    HOME = "home"  # work beyond its guarantee, at its team's home site only
    BORROW = "borrow"  # work beyond its guarantee anywhere; then reclaiming


def _serve_fair(state: PassState, queue: PendingQueue) -> None:
    levels: dict[int, dict[str, list[_Cursor]]] = defaultdict(lambda: defaultdict(list))
    for b in queue.buckets():
        levels[b.priority][b.team].append(_Cursor(queue, b))
    # In-quota work of every priority class goes before any borrowed work: borrowed GPUs
    # yield to their owners whatever the priorities, so lending them to a higher-priority
    # borrower while an owner waits would only make the next pass preempt it again.  For
    # the same reason a site's idle GPUs go to the teams homed there before anyone else:
    # work away from home yields to them.
    home: dict[int, dict[str, list[_Cursor]]] = defaultdict(lambda: defaultdict(list))
    borrow: dict[int, dict[str, list[_Cursor]]] = defaultdict(lambda: defaultdict(list))
    rounds = ((_Phase.QUOTA, levels, home), (_Phase.HOME, home, borrow))
    for phase, serving, deferred in rounds:
        for priority in sorted(serving, reverse=True):
            if state.exhausted():
                return
            if serving[priority]:
                _serve_level(state, serving[priority], deferred[priority], phase=phase)
    for priority in sorted(borrow, reverse=True):
        if state.exhausted():
            return
        if borrow[priority]:
            _serve_level(state, borrow[priority], defaultdict(list), phase=_Phase.BORROW)


def _serve_level(
    state: PassState,
    teams: dict[str, list[_Cursor]],
    deferred: dict[str, list[_Cursor]],
    *,
    phase: str,
) -> None:
    """Serve one priority level, team by fair-share priority, each team oldest-first."""
    heap: list[tuple[float, str]] = []
    for team, team_cursors in teams.items():
        pick = _oldest(team_cursors)
        if pick is not None:
            heap.append((-state.priority(team, pick[0].submitted_at), team))
    heapq.heapify(heap)
    while heap:
        if state.exhausted():
            return
        _, team = heapq.heappop(heap)
        cursors = teams[team]
        pick = _oldest(cursors)
        if pick is None:
            continue
        job, cursor = pick
        state.considered += 1
        outcome = _decide(state, job, phase=phase)
        if outcome in (Outcome.STARTED, Outcome.WAITING):
            cursor.index += 1
        elif outcome == Outcome.HELD_BACK and cursor.held_back < BACKFILL_DEPTH:
            cursor.index += 1
            cursor.held_back += 1
            cursor.skip_longer_than(state.hold_window)
        else:
            # Capacity only shrinks during a pass, so nothing behind this head fits either.
            cursors.remove(cursor)
            if outcome == Outcome.DEFERRED:
                deferred[team].append(cursor)
            elif outcome == Outcome.BLOCKED:
                state.blocked += 1
                state.reserve(job)
            # HELD_BACK past BACKFILL_DEPTH: the bucket is done for this pass; its jobs fit
            # free GPUs, so they need no reservation of their own.
        nxt = _oldest(cursors)
        if nxt is not None:
            heapq.heappush(heap, (-state.priority(team, nxt[0].submitted_at), team))


def _oldest(cursors: list[_Cursor]) -> tuple[PendingJob, _Cursor] | None:
    """The oldest job at the head of one of ``cursors`` (a team's buckets), and its cursor."""
    pick: tuple[Entry, PendingJob, _Cursor] | None = None
    for c in cursors:
        found = c.head()
        if found is not None and (pick is None or found[0] < pick[0]):
            pick = (found[0], found[1], c)
    return None if pick is None else (pick[1], pick[2])


def _decide(state: PassState, job: PendingJob, *, phase: str) -> str:
    if phase == _Phase.HOME:
        state.home_only = True
        try:
            outcome = state.try_start(job, allow_borrow=True)
            if outcome == Outcome.HELD_BACK:
                # Free GPUs at home that only a reservation keeps from it: lent away, they
                # would be reclaimed by this job at once.
                state.keep_home(job)
        finally:
            state.home_only = False
        return Outcome.STARTED if outcome == Outcome.STARTED else Outcome.DEFERRED
    borrow_phase = phase == _Phase.BORROW
    outcome = state.try_start(job, allow_borrow=borrow_phase or not state.config.quotas)
    if outcome == Outcome.STARTED or (outcome == Outcome.HELD_BACK and not borrow_phase):
        return outcome
    if not borrow_phase and state.config.quotas and state.can_borrow_now(job):
        return Outcome.DEFERRED
    # Still here in the borrow phase: the idle GPUs it was deferred for went to others (or
    # are held for a reserved job), so it reclaims what it is owed (:meth:`try_preempt`).
    if state.try_preempt(job):
        return Outcome.WAITING
    return outcome
