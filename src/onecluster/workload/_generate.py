"""A synthetic workload whose job sizes, durations and inter-arrival times follow the figures
fitted to the Alibaba GPU trace v2023 (``fitted_alibaba_v2023.json``, written by
``benchmarks/fit_workload.py``; the figures are quoted in ``docs/workload.md``).

It lets the simulator and the benchmarks run on machines without the trace.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from onecluster.errors import ValidationError
from onecluster.workload._job import TraceJob

__all__ = ["FittedWorkload", "generate", "load_fitted"]

_FITTED = "fitted_alibaba_v2023.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedWorkload:
    """The fitted distributions: empirical job size, lognormal duration (of ln seconds, with
    ``duration_max_s`` the longest duration seen) and inter-arrival time (its mean, for the
    exponential, and ``interarrival_quantiles_s``, evenly spaced quantiles from 0 to 1)."""

    source: str
    gpu_sizes: tuple[int, ...]
    gpu_probabilities: tuple[float, ...]
    duration_mu: float
    duration_sigma: float
    duration_max_s: float
    interarrival_mean_s: float
    interarrival_quantiles_s: tuple[float, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FittedWorkload:
        """Build from the JSON the fitting script writes; :class:`ValidationError` if a
        field is missing or malformed."""
        try:
            sizes = sorted((int(k), float(v)) for k, v in data["gpus"].items())
            duration, arrival = data["duration"], data["interarrival"]
            return cls(
                source=str(data["source"]),
                gpu_sizes=tuple(k for k, _ in sizes),
                gpu_probabilities=tuple(v for _, v in sizes),
                duration_mu=float(duration["mu"]),
                duration_sigma=float(duration["sigma"]),
                duration_max_s=float(duration["max_s"]),
                interarrival_mean_s=float(arrival["mean_s"]),
                interarrival_quantiles_s=tuple(float(q) for q in arrival["quantiles_s"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            msg = f"the fitted workload description is malformed: {exc!r}"
            raise ValidationError(msg) from exc

    @property
    def mean_gpus(self) -> float:
        """Expected GPUs per job."""
        return sum(k * p for k, p in zip(self.gpu_sizes, self.gpu_probabilities, strict=True))


def load_fitted() -> FittedWorkload:
    """The figures fitted to the Alibaba v2023 trace, shipped inside the package."""
    text = resources.files("onecluster.workload").joinpath(_FITTED).read_text(encoding="utf-8")
    return FittedWorkload.from_json(json.loads(text))


def generate(
    n: int,
    seed: int,
    teams: Sequence[str],
    *,
    home_sites: Mapping[str, str] | None = None,
    fitted: FittedWorkload | None = None,
    time_scale: float = 1.0,
    interarrival: Literal["empirical", "exponential"] = "empirical",
    max_duration_s: float | None = None,
    datasets: Mapping[str, int] | None = None,
    dataset_fraction: float = 0.0,
) -> tuple[TraceJob, ...]:
    """``n`` jobs drawn from ``fitted`` (default: :func:`load_fitted`), in arrival order.

    The same arguments and ``seed`` always give the same jobs.  Each job's team is drawn
    uniformly from ``teams`` and its home site is ``home_sites[team]`` when given.  Arrival
    gaps come from the empirical quantiles (inverse CDF, linear between quantiles) or an
    exponential with the fitted mean, divided by ``time_scale`` (> 1 compresses).
    Durations are lognormal, clipped to ``max_duration_s`` (default: the longest in the
    trace) and to at least one second.  With ``datasets`` (name → bytes), a fraction
    ``dataset_fraction`` of jobs reads one of them, chosen uniformly.

    Raises :class:`ValidationError` for a negative ``n``, no teams, a non-positive
    ``time_scale`` or a ``dataset_fraction`` outside [0, 1].
    """
    if n < 0:
        msg = f"cannot generate a negative number of jobs ({n})"
        raise ValidationError(msg)
    if not teams:
        msg = "the generator needs at least one team name"
        raise ValidationError(msg)
    if not time_scale > 0:
        msg = f"the time scale must be greater than 0 (got {time_scale})"
        raise ValidationError(msg)
    if not 0.0 <= dataset_fraction <= 1.0:
        msg = f"dataset_fraction must be in [0, 1] (got {dataset_fraction})"
        raise ValidationError(msg)
    fit = fitted or load_fitted()
    rng = random.Random(seed)
    homes = dict(home_sites or {})
    data = sorted((datasets or {}).items())
    clip = fit.duration_max_s if max_duration_s is None else max_duration_s
    cumulative = list(itertools.accumulate(fit.gpu_probabilities))
    quantiles = fit.interarrival_quantiles_s
    steps = len(quantiles) - 1
    jobs: list[TraceJob] = []
    now = 0.0
    for _ in range(n):
        team = teams[int(rng.random() * len(teams))]
        k = bisect.bisect_left(cumulative, rng.random() * cumulative[-1])
        gpus = fit.gpu_sizes[min(k, len(fit.gpu_sizes) - 1)]
        duration = min(clip, max(1.0, rng.lognormvariate(fit.duration_mu, fit.duration_sigma)))
        dataset, size = None, 0
        if data and rng.random() < dataset_fraction:
            dataset, size = data[int(rng.random() * len(data))]
        jobs.append(
            TraceJob(
                submit_time=now,
                duration_s=duration,
                gpus=gpus,
                team=team,
                dataset=dataset,
                dataset_bytes=size,
                home_site=homes.get(team),
            )
        )
        if interarrival == "exponential":
            gap = rng.expovariate(1.0 / fit.interarrival_mean_s)
        else:
            pos = rng.random() * steps
            i = min(math.floor(pos), steps - 1)
            gap = quantiles[i] + (quantiles[i + 1] - quantiles[i]) * (pos - i)
        now += gap / time_scale
    return tuple(jobs)
