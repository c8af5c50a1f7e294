"""The demo workload ``up`` replays: trace jobs squeezed into a minute or two of real time.

Pure: a function of trace jobs, the fabric and the demo's length.  Each job becomes a real
command (``sleep <seconds>``) whose length is the job's trace duration compressed onto a log
scale, arriving at its trace time compressed linearly into the first half of the demo, with
its GPU count multiplied by one factor so the fabric is about as loaded as the trace's
cluster was (a 1-GPU pod of a 6,000-GPU cluster is invisible on 1,200 GPUs otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from onecluster.errors import ValidationError
from onecluster.model import Fabric
from onecluster.workload import TraceJob, generate, load_trace

__all__ = ["DemoJob", "DemoWorkload", "compress", "demo_workload"]

#: Share of the demo during which jobs arrive; the rest lets the last ones finish.
ARRIVAL_SHARE = 0.5
#: Longest compressed job, as a share of the demo.
LONGEST_SHARE = 0.25
#: Offered load (GPU-seconds asked ÷ GPU-seconds the fabric has) the GPU factor aims at.
TARGET_LOAD = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoJob:
    """One job of the demo: submit it ``at_s`` seconds into the replay."""

    at_s: float
    name: str
    team: str
    gpus: int
    run_s: float

    @property
    def command(self) -> list[str]:
        """The real process the job runs."""
        return ["sleep", f"{self.run_s:.1f}"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoWorkload:
    """The jobs to replay, in arrival order, and where they came from (for the user)."""

    source: str
    gpu_factor: int
    jobs: tuple[DemoJob, ...]


def demo_workload(
    fabric: Fabric,
    duration_s: float,
    *,
    trace_path: Path | None,
    jobs: int,
    seed: int = 1,
    skip: int = 1000,
) -> DemoWorkload:
    """``jobs`` jobs for a ``duration_s``-second demo on ``fabric``.

    With ``trace_path``, a slice of that trace (``skip`` jobs in, ``jobs`` long, teams assigned
    by the reader's stable hash); otherwise jobs drawn from the generator fitted to the
    Alibaba v2023 trace with ``seed``.  Raises :class:`ValidationError` for a fabric without
    teams or a non-positive duration, :class:`TraceError` for an unreadable trace.
    """
    teams = [t.name for t in fabric.teams]
    if not teams:
        msg = f"fabric {fabric.name} declares no teams, so there is nobody to submit jobs"
        raise ValidationError(msg, hint="add a teams: section to the fabric file")
    homes = {t.name: t.home_site for t in fabric.teams}
    if trace_path is not None:
        raw = load_trace(trace_path, teams=teams, home_sites=homes, skip=skip, limit=jobs)
        source = f"a {len(raw)}-job slice of the Alibaba GPU trace v2023 ({trace_path})"
    else:
        raw = generate(jobs, seed, teams, home_sites=homes)
        source = f"{len(raw)} jobs from the generator fitted to the Alibaba GPU trace v2023"
    return compress(raw, fabric, duration_s, source=source)


def compress(
    raw: Sequence[TraceJob], fabric: Fabric, duration_s: float, *, source: str
) -> DemoWorkload:
    """Squeeze ``raw`` into ``duration_s`` seconds (see the module docstring)."""
    if not duration_s > 0:
        msg = f"the demo duration must be greater than 0 seconds (got {duration_s})"
        raise ValidationError(msg)
    if not raw:
        return DemoWorkload(source=source, gpu_factor=1, jobs=())
    ordered = sorted(raw, key=lambda j: j.submit_time)
    first, last = ordered[0].submit_time, ordered[-1].submit_time
    window = duration_s * ARRIVAL_SHARE
    longest = max(duration_s * LONGEST_SHARE, 2.0)
    shortest = min(1.0, longest / 2)
    low = math.log(min(j.duration_s for j in ordered))
    high = math.log(max(j.duration_s for j in ordered))
    runs = [_log_scale(j.duration_s, low, high, shortest, longest) for j in ordered]
    largest_pool = max(p.count for s in fabric.sites for p in s.pools)
    asked = sum(j.gpus * r for j, r in zip(ordered, runs, strict=True))
    factor = TARGET_LOAD * fabric.total_gpus * (window + longest) / asked
    # a power of two reads as whole nodes (8, 16, 32 … GPUs per gang) and is never above the
    # factor that would make the biggest gang outgrow the biggest pool
    ceiling = max(1, min(factor, largest_pool / max(j.gpus for j in ordered)))
    factor_int = 2 ** int(math.log2(ceiling))
    jobs = tuple(
        DemoJob(
            at_s=0.0 if last == first else (j.submit_time - first) / (last - first) * window,
            name=(j.name or f"job-{i:04d}").lower(),
            team=j.team,
            gpus=j.gpus * factor_int,
            run_s=round(run, 1),
        )
        for i, (j, run) in enumerate(zip(ordered, runs, strict=True))
    )
    return DemoWorkload(source=source, gpu_factor=factor_int, jobs=jobs)


def _log_scale(value: float, low: float, high: float, lo_out: float, hi_out: float) -> float:
    """Map ``value`` (``ln`` in ``[low, high]``) onto ``[lo_out, hi_out]``, logarithmically."""
    if high <= low:
        return (lo_out + hi_out) / 2
    share = (math.log(value) - low) / (high - low)
    return lo_out + share * (hi_out - lo_out)
