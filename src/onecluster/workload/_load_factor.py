"""Offered load: how much of a fabric a workload asks for, and compressing arrivals to a target.

Replaying a trace on a fabric of another size only says something when the fabric is about as
busy as the trace's own cluster was; these two functions make that explicit and repeatable.
"""

from __future__ import annotations

from collections.abc import Sequence

from onecluster.errors import ValidationError
from onecluster.workload._job import TraceJob
from onecluster.workload._rows import select

__all__ = ["at_load", "offered_load"]


def offered_load(jobs: Sequence[TraceJob], gpus: int) -> float:
    """GPU-seconds asked for ÷ (arrival span × ``gpus``): 1.0 keeps every GPU busy.

    Raises :class:`ValidationError` for fewer than two distinct arrival times or no GPUs.
    """
    if gpus <= 0:
        msg = f"offered load needs a fabric with GPUs (got {gpus})"
        raise ValidationError(msg)
    times = [j.submit_time for j in jobs]
    span = max(times, default=0.0) - min(times, default=0.0)
    if span <= 0:
        msg = "offered load needs jobs arriving at two different times at least"
        raise ValidationError(msg)
    return sum(j.gpus * j.duration_s for j in jobs) / (span * gpus)


def at_load(jobs: Sequence[TraceJob], gpus: int, load: float) -> tuple[tuple[TraceJob, ...], float]:
    """``jobs`` with arrivals compressed (or stretched) to offered ``load``, and the factor.

    The first arrival moves to time 0; run times are unchanged.
    """
    if not load > 0:
        msg = f"the offered load must be greater than 0 (got {load})"
        raise ValidationError(msg)
    scale = load / offered_load(jobs, gpus)
    return select(jobs, time_scale=scale, rebase=True), scale
