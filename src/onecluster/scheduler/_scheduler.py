"""The scheduler: one pure decision function shared by the live server and the simulator."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Collection

from onecluster.model import Fabric, JobSpec
from onecluster.scheduler._admission import admit
from onecluster.scheduler._config import PolicyConfig
from onecluster.scheduler._ledger import AllocationLedger
from onecluster.scheduler._pass import Outcome, PassState, PoolInfo
from onecluster.scheduler._queue import Bucket, BucketKey, Entry, PendingQueue
from onecluster.scheduler._state import ClusterView, PendingJob, Plan

__all__ = ["Scheduler"]


class Scheduler:
    """Decides which pending jobs start where, and what to preempt, given observed state.

    ``plan`` is a pure function of (fabric, config, view, queue, now): it does no I/O, reads
    no clock and mutates nothing it is given.  Order of service (``unified``/``separate``):
    priority class, highest first; within a class, the team with the smallest weighted share
    of GPUs held goes next (weighted fair share); within a team, oldest first.  In-quota
    work of every class is placed before any borrowed work; a blocked in-quota job preempts
    borrowed work (any team's) or pre-emptible lower-priority work; other blocked jobs
    reserve their place and smaller or shorter jobs backfill around them.  ``fifo`` serves
    strictly in submit order and stops at the first job that does not fit.
    """

    def __init__(self, fabric: Fabric, config: PolicyConfig | None = None) -> None:
        self.fabric = fabric
        self.config = config or PolicyConfig()
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

    def plan(self, view: ClusterView, queue: PendingQueue, now: float) -> Plan:
        """Decide starts and preemptions for this moment."""
        running = view.running
        ledger = running if isinstance(running, AllocationLedger) else AllocationLedger.of(running)
        state = PassState(
            fabric=self.fabric,
            config=self.config,
            pools=self._pools,
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


def _serve_fair(state: PassState, queue: PendingQueue) -> None:
    levels: dict[int, dict[str, list[_Cursor]]] = defaultdict(lambda: defaultdict(list))
    for b in queue.buckets():
        levels[b.priority][b.team].append(_Cursor(queue, b))
    # In-quota work of every priority class goes before any borrowed work: borrowed GPUs
    # yield to their owners whatever the priorities, so lending them to a higher-priority
    # borrower while an owner waits would only make the next pass preempt it again.
    deferred: dict[int, dict[str, list[_Cursor]]] = defaultdict(lambda: defaultdict(list))
    for priority in sorted(levels, reverse=True):
        if state.exhausted():
            return
        _serve_level(state, levels[priority], deferred[priority], borrow_phase=False)
    for priority in sorted(deferred, reverse=True):
        if state.exhausted():
            return
        if deferred[priority]:
            _serve_level(state, deferred[priority], defaultdict(list), borrow_phase=True)


def _serve_level(
    state: PassState,
    teams: dict[str, list[_Cursor]],
    deferred: dict[str, list[_Cursor]],
    *,
    borrow_phase: bool,
) -> None:
    """Serve one priority level, team by weighted fair share, each team oldest-first."""
    heap = [(state.share(team), team) for team in teams]
    heapq.heapify(heap)
    while heap:
        if state.exhausted():
            return
        _, team = heapq.heappop(heap)
        cursors = teams[team]
        pick: tuple[Entry, PendingJob, _Cursor] | None = None
        for c in cursors:
            found = c.head()
            if found is not None and (pick is None or found[0] < pick[0]):
                pick = (found[0], found[1], c)
        if pick is None:
            continue
        _, job, cursor = pick
        state.considered += 1
        outcome = _decide(state, job, borrow_phase=borrow_phase)
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
        if cursors:
            heapq.heappush(heap, (state.share(team), team))


def _decide(state: PassState, job: PendingJob, *, borrow_phase: bool) -> str:
    outcome = state.try_start(job, allow_borrow=borrow_phase or not state.config.quotas)
    if outcome == Outcome.STARTED or (outcome == Outcome.HELD_BACK and not borrow_phase):
        return outcome
    if not borrow_phase and state.config.quotas and state.can_borrow_now(job):
        return Outcome.DEFERRED
    # Still here in the borrow phase: the idle GPUs it was deferred for went to others (or
    # are held for a reserved job), so an owner with quota to spare reclaims its own.
    if state.try_preempt(job):
        return Outcome.WAITING
    return outcome
