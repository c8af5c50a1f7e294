"""The discrete-event simulator: a virtual clock driving the live scheduler core.

Events are arrivals (read in order from the trace), completions, the end of a preempted
job's grace period, and the end of a dataset's staging.  After each batch of simultaneous
events one scheduling pass runs (:meth:`Scheduler.plan`) and its plan is applied: starts take
their GPUs at once and hold them while the dataset is staged, then for the job's duration;
preemptions mark the allocation draining, and when the grace period ends the job goes back to
the queue with its id and submit time.

A preempted job keeps what its checkpoints saved (:meth:`JobSpec.kept_after`: every whole
checkpoint interval it ran, or everything if it checkpoints on SIGTERM) and restarts from
there; a job that declares no checkpoint restarts from scratch.  ``checkpoint_interval_s``
gives every job of the trace that declares nothing that interval.  The work thrown away is
counted in ``lost_gpu_s``.  A job that finishes within its grace period completes.

One :class:`PendingQueue` and one :class:`AllocationLedger` live for the whole run and are
updated incrementally, so a pass never rebuilds them.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import cast

from onecluster.errors import ImpossibleJobError, PlatformError, ValidationError
from onecluster.model import Fabric, JobSpec
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    PolicyConfig,
    PolicyKind,
    Preempt,
    Scheduler,
    Start,
    UsageHistory,
)
from onecluster.simulate._metrics import Tally
from onecluster.simulate._result import SimResult
from onecluster.simulate._staging import Circuits
from onecluster.simulate._teams import with_trace_datasets, with_trace_teams
from onecluster.workload import TraceJob

__all__ = ["simulate"]

_STAGED, _END, _EXITED = 0, 1, 2
_REJECTS_SHOWN = 3


class _Job:
    """Mutable per-job bookkeeping (internal to one run)."""

    __slots__ = (
        "attempt",
        "draining",
        "id",
        "queued_at",
        "spec",
        "started_at",
        "submitted",
        "waited",
        "work_left",
    )

    def __init__(self, job_id: str, spec: JobSpec, submitted: float) -> None:
        self.id = job_id
        self.spec = spec
        self.submitted = submitted
        self.queued_at = submitted
        self.work_left = spec.duration_s
        self.attempt = 0
        self.draining = False
        self.started_at = 0.0
        self.waited = 0.0


def simulate(
    fabric: Fabric,
    jobs: Sequence[TraceJob],
    policy_kind: str = "unified",
    *,
    seed: int = 0,
    grace_s: float | None = None,
    checkpoint_interval_s: float | None = None,
    config: PolicyConfig | None = None,
) -> SimResult:
    """Replay ``jobs`` on ``fabric`` under the policy ``policy_kind`` and measure the result.

    ``config`` overrides the policy (its ``kind`` wins over ``policy_kind``).  Trace teams
    the fabric lacks are added with weight 1 and no quota (a derived guarantee), with a
    warning in the result.
    Jobs no site could ever run (admission refuses them) are counted in ``jobs_rejected``
    and named in a warning; every other job ends completed.  The run is deterministic: the
    same inputs give the same result; ``seed`` is recorded for the caller's bookkeeping.

    Raises :class:`ValidationError` for an unknown policy, bad ``grace_s`` /
    ``checkpoint_interval_s`` or a job the platform cannot accept as a spec (e.g. a team
    name that is not a valid identifier), and :class:`PlatformError` if the scheduler ever
    plans more GPUs than a pool has (a scheduler bug, never silently absorbed).
    """
    cfg = config or PolicyConfig(kind=cast(PolicyKind, policy_kind))  # validates the kind
    if grace_s is not None:  # else the config's (default 30 s)
        cfg = replace(cfg, grace_s=grace_s)  # the scheduler weighs preempting against it
    if checkpoint_interval_s is not None and not checkpoint_interval_s > 0:
        msg = f"checkpoint_interval_s must be greater than 0 (got {checkpoint_interval_s})"
        raise ValidationError(msg)
    wall = time.perf_counter()
    with_teams, warnings = with_trace_teams(fabric, jobs)
    full = with_trace_datasets(with_teams, jobs)
    replicas = {d.name: set(d.sites) for d in full.datasets}
    run = _Run(full, cfg, cfg.grace_s, checkpoint_interval_s, replicas)
    run.load(jobs)
    run.loop()
    return run.tally.result(
        policy=cfg.kind,
        warnings=warnings + run.reject_warnings(),
        sim_wall_s=time.perf_counter() - wall,
        seed=seed,
    )


class _Run:
    """State of one simulation run."""

    def __init__(
        self,
        fabric: Fabric,
        config: PolicyConfig,
        grace_s: float,
        checkpoint_s: float | None,
        replicas: dict[str, set[str]],
    ) -> None:
        self.fabric = fabric
        self.scheduler = Scheduler(fabric, config)
        self.grace_s = grace_s
        self.checkpoint_s = checkpoint_s
        self.queue = PendingQueue()
        self.ledger = AllocationLedger()
        self.replicas: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in replicas.items()}
        self.circuits = Circuits(fabric)
        self.history = UsageHistory(config.fair_share.half_life_s)
        self.usage: dict[str, float] = {}
        self.view = ClusterView(
            running=self.ledger,
            replicas=MappingProxyType(self.replicas),
            circuit_load=self.circuits.load_view,
            usage=MappingProxyType(self.usage),
        )
        self.capacity = {(s.name, p.gpu_type): p.count for s in fabric.sites for p in s.pools}
        self.tally = Tally(fabric)
        self.jobs: dict[str, _Job] = {}
        self.arrivals: list[_Job] = []
        self.rejected: list[tuple[str, str]] = []
        self.events: list[tuple[float, int, int, str, int]] = []
        self.seq = 0

    # -- setup --------------------------------------------------------------------------

    def load(self, jobs: Sequence[TraceJob]) -> None:
        """Admit every trace job; refused ones are tallied, the rest wait for their arrival."""
        ordered = sorted(range(len(jobs)), key=lambda i: jobs[i].submit_time)
        width = len(str(len(jobs)))
        for i in ordered:
            tj = jobs[i]
            job_id = f"job-{i:0{width}d}"
            spec = tj.to_spec(job_id)
            if self.checkpoint_s is not None and spec.checkpoint_interval_s is None:
                spec = replace(spec, checkpoint_interval_s=self.checkpoint_s)
            try:
                self.scheduler.admit(spec)
            except ImpossibleJobError as exc:
                self.rejected.append((job_id, exc.message))
                self.tally.rejected(spec.team)
                continue
            job = _Job(job_id, spec, tj.submit_time)
            self.jobs[job_id] = job
            self.arrivals.append(job)
            self.tally.submitted(spec.team, tj.submit_time)

    def reject_warnings(self) -> tuple[str, ...]:
        """A warning naming the first few refused jobs, if any were."""
        if not self.rejected:
            return ()
        shown = "; ".join(f"{j}: {why}" for j, why in self.rejected[:_REJECTS_SHOWN])
        return (
            f"{len(self.rejected)} job(s) can never run on this fabric and were skipped ({shown})",
        )

    # -- the event loop -----------------------------------------------------------------

    def loop(self) -> None:
        """Run until every admitted job has completed."""
        events, arrivals = self.events, self.arrivals
        i, n = 0, len(arrivals)
        while i < n or events:
            now = min(
                arrivals[i].submitted if i < n else math.inf,
                events[0][0] if events else math.inf,
            )
            while i < n and arrivals[i].submitted == now:
                self.queue.add(
                    PendingJob(job_id=arrivals[i].id, spec=arrivals[i].spec, submitted_at=now)
                )
                i += 1
            while events and events[0][0] == now:
                _, _, kind, key, attempt = heapq.heappop(events)
                if kind == _STAGED:
                    self.circuits.staged(key, self.replicas)
                elif kind == _END:
                    self._end(key, attempt, now)
                else:
                    self._exited(key, attempt, now)
            if len(self.queue):
                self._apply_plan(now)

    def _push(self, at: float, kind: int, key: str, attempt: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, key, attempt))

    def _apply_plan(self, now: float) -> None:
        self.usage.update(self.history.at(now))
        plan = self.scheduler.plan(self.view, self.queue, now)
        self.tally.passes += 1
        for p in plan.preemptions:
            self._preempt(p, now)
        for s in plan.starts:
            self._start(s, now)

    # -- applying decisions -------------------------------------------------------------

    def _start(self, s: Start, now: float) -> None:
        job = self.jobs[s.job_id]
        self.queue.remove(s.job_id)
        used = self.ledger.used
        for part in s.parts:
            key = (part.site, part.gpu_type)
            if used[key] + part.gpus > self.capacity.get(key, 0):
                msg = (
                    f"the scheduler placed {part.gpus} GPUs of job {s.job_id} on {part.site}/"
                    f"{part.gpu_type}, which has only {self.capacity.get(key, 0) - used[key]} free"
                )
                raise PlatformError(msg)
        staging = 0.0
        if s.missing_bytes > 0 and job.spec.dataset is not None:
            staging = s.staging_s
            if not math.isfinite(staging) or staging < 0:
                msg = f"the scheduler gave job {s.job_id} a staging time of {staging} s"
                raise PlatformError(msg)
            transfer = self.circuits.begin(job.spec.dataset, s, self.replicas, staging)
            self._push(now + staging, _STAGED, transfer)
            self.tally.staged(s)
        end = now + staging + job.work_left
        self.ledger.add(
            Allocation(
                job_id=s.job_id,
                team=job.spec.team,
                parts=s.parts,
                priority=job.spec.priority,
                borrowed=s.borrowed,
                preemptible=s.preemptible,
                started_at=now,
                expected_end=end,
                checkpoint_interval_s=job.spec.checkpoint_interval_s,
                checkpoint_on_sigterm=job.spec.checkpoint_on_sigterm,
            )
        )
        job.waited += now - job.queued_at
        self.history.change(job.spec.team, sum(p.gpus for p in s.parts), now)
        self.tally.started(job.spec.team, s, used)
        job.started_at = now + staging
        job.draining = False
        self._push(end, _END, s.job_id, job.attempt)

    def _preempt(self, p: Preempt, now: float) -> None:
        job = self.jobs[p.job_id]
        alloc = self.ledger.get(p.job_id)
        if alloc is None or alloc.draining:
            return
        self.ledger.replace(replace(alloc, draining=True))
        job.draining = True
        self.tally.preempted(job.spec.team)
        claimant = self.jobs.get(p.for_job_id)
        if alloc.borrowed and claimant is not None:
            # The owner's wait for its GPUs: from its (re)queueing until the victim is gone.
            self.tally.reclaimed(now + self.grace_s - claimant.queued_at)
        self._push(now + self.grace_s, _EXITED, p.job_id, job.attempt)

    def _end(self, job_id: str, attempt: int, now: float) -> None:
        job = self.jobs[job_id]
        if attempt != job.attempt:
            return
        job.attempt += 1
        alloc = self.ledger.remove(job_id)
        self.history.change(alloc.team, -alloc.gpus, now)
        self.tally.released(alloc, now)
        self.tally.completed(job.spec.team, now - job.submitted, job.waited, now, job_id)

    def _exited(self, job_id: str, attempt: int, now: float) -> None:
        job = self.jobs[job_id]
        if attempt != job.attempt:
            return
        job.attempt += 1
        alloc = self.ledger.remove(job_id)
        self.history.change(alloc.team, -alloc.gpus, now)
        self.tally.released(alloc, now)
        ran = max(now - job.started_at, 0.0)
        kept = min(job.spec.kept_after(ran), job.work_left)
        self.tally.lost(alloc.gpus * (ran - kept))
        if kept > 0 and job.work_left - kept > 0:
            job.work_left -= kept
            job.spec = replace(job.spec, duration_s=job.work_left)
        job.queued_at = now
        self.queue.add(PendingJob(job_id=job_id, spec=job.spec, submitted_at=job.submitted))
