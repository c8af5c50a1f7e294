"""Counters a run accumulates, turned into a :class:`SimResult` at the end."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping

from onecluster.errors import PlatformError
from onecluster.model import Fabric
from onecluster.scheduler import Allocation, Start
from onecluster.simulate._result import SimResult, SiteStats, TeamStats

__all__ = ["Tally", "p95"]


def p95(values: list[float]) -> float:
    """The 95th percentile by nearest rank (0 for no values)."""
    return _quantile(values, 0.95)


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile by nearest rank (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


class _TeamTally:
    __slots__ = ("borrowed", "gpu_s", "jcts", "jobs", "preemptions", "waits")

    def __init__(self) -> None:
        self.jobs = 0
        self.gpu_s = 0.0
        self.waits: list[float] = []
        self.jcts: list[float] = []
        self.preemptions = 0
        self.borrowed = 0


class Tally:
    """Everything a run counts; fed by the event loop, read once by :meth:`result`."""

    def __init__(self, fabric: Fabric) -> None:
        self.site_gpus = {s.name: s.total_gpus for s in fabric.sites}
        self.total_gpus = fabric.total_gpus
        self.teams: dict[str, _TeamTally] = defaultdict(_TeamTally)
        self.site_busy: dict[str, float] = defaultdict(float)
        self.site_starts: dict[str, int] = defaultdict(int)
        self.site_bytes: dict[str, int] = defaultdict(int)
        self.peak: dict[tuple[str, str], int] = defaultdict(int)
        self.first_arrival = math.inf
        self.last_arrival = -math.inf
        self.last_completion = -math.inf
        self.window_busy = 0.0
        self.jobs = 0
        self.rejects = 0
        self.preemptions = 0
        self.bytes_moved = 0
        self.busy = 0.0
        self.lost_gpu_s = 0.0
        self.passes = 0
        self.reclaims: list[float] = []
        self.done: set[str] = set()

    def submitted(self, team: str, at: float) -> None:
        """A job was admitted and will arrive at ``at``."""
        self.jobs += 1
        self.teams[team].jobs += 1
        self.first_arrival = min(self.first_arrival, at)
        self.last_arrival = max(self.last_arrival, at)

    def rejected(self, team: str) -> None:
        """Admission refused a job of ``team``."""
        self.rejects += 1
        self.teams[team].jobs += 1

    def started(self, team: str, start: Start, used: Mapping[tuple[str, str], int]) -> None:
        """``start`` was applied; ``used`` is the ledger's GPUs in use per pool after it."""
        if start.borrowed:
            self.teams[team].borrowed += 1
        for p in start.parts:
            key = (p.site, p.gpu_type)
            self.site_starts[p.site] += 1
            self.peak[key] = max(self.peak[key], used[key])

    def staged(self, start: Start) -> None:
        """``start`` moves ``missing_bytes`` of its dataset to its (first) site."""
        self.bytes_moved += start.missing_bytes
        self.site_bytes[start.parts[0].site] += start.missing_bytes

    def preempted(self, team: str) -> None:
        """A job of ``team`` was preempted."""
        self.preemptions += 1
        self.teams[team].preemptions += 1

    def released(self, alloc: Allocation, now: float) -> None:
        """``alloc`` gave its GPUs back at ``now``."""
        held = max(now - alloc.started_at, 0.0)
        gpu_s = alloc.gpus * held
        self.busy += gpu_s
        inside = min(now, self.last_arrival) - max(alloc.started_at, self.first_arrival)
        if inside > 0:
            self.window_busy += alloc.gpus * inside
        self.teams[alloc.team].gpu_s += gpu_s
        for p in alloc.parts:
            self.site_busy[p.site] += p.gpus * held

    def lost(self, gpu_s: float) -> None:
        """Work thrown away by a preemption."""
        self.lost_gpu_s += gpu_s

    def reclaimed(self, wait_s: float) -> None:
        """An owner waited ``wait_s`` from its queueing until borrowed GPUs were freed for it."""
        self.reclaims.append(wait_s)

    def completed(self, team: str, jct: float, waited: float, now: float, job_id: str) -> None:
        """Job ``job_id`` of ``team`` completed at ``now``; a second completion is a bug."""
        if job_id in self.done:
            msg = f"job {job_id} completed twice (a simulator bug, never silently absorbed)"
            raise PlatformError(msg)
        self.done.add(job_id)
        t = self.teams[team]
        t.jcts.append(jct)
        t.waits.append(waited)
        self.last_completion = max(self.last_completion, now)

    def result(
        self, *, policy: str, warnings: tuple[str, ...], sim_wall_s: float, seed: int
    ) -> SimResult:
        """The frozen summary of the run."""
        makespan = max(self.last_completion - self.first_arrival, 0.0)
        capacity = self.total_gpus * makespan
        span = max(self.last_arrival - self.first_arrival, 0.0)
        window = self.total_gpus * span
        waits = [w for t in self.teams.values() for w in t.waits]
        jcts = [j for t in self.teams.values() for j in t.jcts]
        teams = {
            name: TeamStats(
                jobs=t.jobs,
                completed=len(t.jcts),
                gpu_s=t.gpu_s,
                mean_wait_s=_mean(t.waits),
                p95_wait_s=p95(t.waits),
                mean_jct_s=_mean(t.jcts),
                preemptions=t.preemptions,
                borrowed_starts=t.borrowed,
            )
            for name, t in self.teams.items()
        }
        sites = {
            name: SiteStats(
                gpus=gpus,
                busy_gpu_s=self.site_busy[name],
                utilization=self.site_busy[name] / (gpus * makespan) if makespan > 0 else 0.0,
                starts=self.site_starts[name],
                bytes_in=self.site_bytes[name],
                peak_gpus=sum(v for (s, _), v in self.peak.items() if s == name),
            )
            for name, gpus in self.site_gpus.items()
        }
        return SimResult(
            policy=policy,
            seed=seed,
            jobs=self.jobs + self.rejects,
            jobs_completed=len(jcts),
            jobs_rejected=self.rejects,
            gpu_utilization=self.busy / capacity if capacity > 0 else 0.0,
            window_utilization=self.window_busy / window if window > 0 else 0.0,
            mean_wait_s=_mean(waits),
            p95_wait_s=p95(waits),
            mean_jct_s=_mean(jcts),
            p95_jct_s=p95(jcts),
            preemptions=self.preemptions,
            bytes_moved=self.bytes_moved,
            makespan_s=makespan,
            arrival_span_s=span,
            busy_gpu_s=self.busy,
            lost_gpu_s=self.lost_gpu_s,
            reclaims=len(self.reclaims),
            reclaim_p99_s=_quantile(self.reclaims, 0.99),
            reclaim_max_s=max(self.reclaims, default=0.0),
            passes=self.passes,
            sim_wall_s=sim_wall_s,
            teams=teams,
            sites=sites,
            peak_usage={f"{s}/{t}": v for (s, t), v in sorted(self.peak.items())},
            warnings=warnings,
        )


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0
