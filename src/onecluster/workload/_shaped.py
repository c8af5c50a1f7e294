"""A workload with the shape of a production GPU cluster, for checks the fitted trace cannot make.

The Alibaba trace behind :func:`~onecluster.workload.generate` is light-tailed (clipped to
hours) and has no teams.  Production queues look different, and a scheduler tuned on one
shape can lose on another, so this generator draws the shape of a production trace of 82,000
jobs from 15 teams on three sites (the figures are the issue's; ``docs/workload.md`` quotes
them):

* durations are heavy-tailed: median 19 min, p90 3 h, p99 71 h, the longest 1,285 h
  (log-linear between those quantiles, so the tail above p99 is Pareto-like);
* 93 % of jobs use one GPU; a few use 16–128 (:data:`SIZES`);
* one team submits half of all jobs, the others follow a Zipf law;
* arrivals come in bursts: a team submits a sweep of jobs of one size at once (sweep sizes
  are geometric, mean :data:`SWEEP_MEAN`), and sweeps arrive in busy and quiet spells.

Each team has a home site: the dominant team the first site, the others the sites in turn.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence

from onecluster.errors import ValidationError
from onecluster.workload._job import TraceJob

__all__ = ["DURATION_QUANTILES", "SIZES", "SWEEP_MEAN", "shaped"]

#: (quantile, seconds): the duration distribution, log-linear between the points.
DURATION_QUANTILES: tuple[tuple[float, float], ...] = (
    (0.0, 30.0),
    (0.5, 19 * 60.0),
    (0.9, 3 * 3600.0),
    (0.99, 71 * 3600.0),
    (1.0, 1285 * 3600.0),
)
#: (GPUs, probability) of a job's size.
SIZES: tuple[tuple[int, float], ...] = (
    (1, 0.93),
    (2, 0.025),
    (4, 0.02),
    (8, 0.017),
    (16, 0.005),
    (32, 0.002),
    (64, 0.0007),
    (128, 0.0003),
)
#: Mean jobs per sweep (a burst of one team's jobs submitted together).
SWEEP_MEAN = 8.0
#: Share of all jobs the dominant team submits.
DOMINANT_SHARE = 0.5
#: Busy spells have this many times the sweep rate of quiet ones; each spell lasts about
#: :data:`SPELL_SWEEPS` sweeps of its own kind.
BUSY_FACTOR = 6.0
SPELL_SWEEPS = 40


def shaped(
    n: int, seed: int, sites: Sequence[str], *, teams: int = 15, prefix: str = "team"
) -> tuple[TraceJob, ...]:
    """``n`` jobs of the production shape, in arrival order (deterministic in ``seed``).

    Teams are ``{prefix}-01`` (the dominant one) … ``{prefix}-{teams:02d}``; arrival times
    are in arbitrary units (scale them with :func:`~onecluster.workload.at_load`).  Raises
    :class:`ValidationError` for a negative ``n``, fewer than two teams or no sites.
    """
    if n < 0:
        msg = f"cannot generate a negative number of jobs ({n})"
        raise ValidationError(msg)
    if teams < 2:
        msg = f"the shaped workload needs at least 2 teams (got {teams})"
        raise ValidationError(msg)
    if not sites:
        msg = "the shaped workload needs at least one site"
        raise ValidationError(msg)
    rng = random.Random(seed)
    names = [f"{prefix}-{i + 1:02d}" for i in range(teams)]
    homes = {
        name: sites[0] if i == 0 else sites[(i - 1) % len(sites)] for i, name in enumerate(names)
    }
    zipf = [1.0 / k for k in range(1, teams)]
    others = [(1.0 - DOMINANT_SHARE) * w / sum(zipf) for w in zipf]
    team_cdf = list(itertools.accumulate([DOMINANT_SHARE, *others]))
    size_cdf = list(itertools.accumulate(p for _, p in SIZES))
    jobs: list[TraceJob] = []
    now = 0.0
    busy = False
    spell_left = SPELL_SWEEPS
    while len(jobs) < n:
        team = names[min(bisect.bisect_left(team_cdf, rng.random() * team_cdf[-1]), teams - 1)]
        k = bisect.bisect_left(size_cdf, rng.random() * size_cdf[-1])
        gpus = SIZES[min(k, len(SIZES) - 1)][0]
        sweep = 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - 1.0 / SWEEP_MEAN))
        for _ in range(min(sweep, n - len(jobs))):
            jobs.append(
                TraceJob(
                    submit_time=now,
                    duration_s=_duration(rng.random()),
                    gpus=gpus,
                    team=team,
                    home_site=homes[team],
                )
            )
        spell_left -= 1
        if spell_left == 0:
            busy, spell_left = not busy, SPELL_SWEEPS
        now += rng.expovariate(BUSY_FACTOR if busy else 1.0)
    return tuple(jobs)


def _duration(u: float) -> float:
    """The duration at quantile ``u`` (log-linear between :data:`DURATION_QUANTILES`)."""
    points = DURATION_QUANTILES
    for (q0, d0), (q1, d1) in itertools.pairwise(points):
        if u <= q1:
            t = (u - q0) / (q1 - q0)
            return math.exp(math.log(d0) + t * (math.log(d1) - math.log(d0)))
    return points[-1][1]
