"""How long a worker's steps and cross-site rounds take, as Prometheus histograms that
:class:`~onecluster.training.CrossSite` observes into and ``/metrics`` exports
(:mod:`._prometheus`).  Counts that exist already (steps, rounds, bytes) are not kept here:
they are read from :meth:`CrossSite.stats` at scrape time."""

from __future__ import annotations

from prometheus_client import Histogram

__all__ = ["STEP_BUCKETS_S", "SYNC_BUCKETS_S", "RunTimings"]

#: An inner step: milliseconds for a small model on a CPU, seconds for a large one.
STEP_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: A cross-site round: a metro circuit's milliseconds to minutes behind a slow site.
SYNC_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


class RunTimings:
    """The histograms of one worker (thread-safe; exported by registering them).

    - ``step``: the wall time of an inner step, from the end of the previous
      :meth:`CrossSite.step` (or of :meth:`CrossSite.start`) to the end of this one: the
      script's compute, the optimizer and any round that landed in it;
    - ``outer_sync``: a round's cross-site exchange, from its launch to its averaged result
      (whether or not it overlapped compute); a round that turned into a heal is not one.
    """

    def __init__(self) -> None:
        self.step = Histogram(
            "onecluster_training_step_duration_seconds",
            "Wall time of an inner step, the round landed in it included",
            buckets=STEP_BUCKETS_S,
            registry=None,
        )
        self.outer_sync = Histogram(
            "onecluster_training_outer_sync_duration_seconds",
            "A cross-site round's exchange, from its launch to the averaged result",
            buckets=SYNC_BUCKETS_S,
            registry=None,
        )
