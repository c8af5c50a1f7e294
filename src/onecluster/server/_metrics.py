"""The server's Prometheus metrics, in a registry of its own (one per app, never global).

Two kinds live here.  What happens — requests served, reconcile passes — is observed as it
happens into the instruments of :class:`ServerMetrics`.  What *is* — jobs, pools, sites,
circuits, transfers, the register — is read at scrape time by
:class:`~onecluster.server._metrics_cluster.ClusterCollector` from the store and the
components' ``statistics()`` (no second set of books).  ``docs/noc.md`` ("Metrics") lists
every family.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.registry import Collector

__all__ = ["HTTP_BUCKETS_S", "RECONCILE_BUCKETS_S", "ServerMetrics"]

#: Request durations: a cached read answers in a millisecond, a report takes seconds.
HTTP_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Reconcile passes and phases: milliseconds when idle, seconds with a long queue.
RECONCILE_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServerMetrics:
    """The instruments of one server; :meth:`exposition` renders them and every collector
    added with :meth:`add_collector`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Histogram(
            "onecluster_http_request_duration_seconds",
            "API requests by method, route template and status class (2xx, 4xx, 5xx).",
            ("method", "route", "status_class"),
            buckets=HTTP_BUCKETS_S,
            registry=self.registry,
        )
        self.reconcile_pass = Histogram(
            "onecluster_reconcile_pass_duration_seconds",
            "Duration of the leader's reconcile passes.",
            buckets=RECONCILE_BUCKETS_S,
            registry=self.registry,
        )
        self.reconcile_phase = Histogram(
            "onecluster_reconcile_phase_duration_seconds",
            "Duration of each phase of a reconcile pass.",
            ("phase",),
            buckets=RECONCILE_BUCKETS_S,
            registry=self.registry,
        )
        self.reconcile_failures = Counter(
            "onecluster_reconcile_phase_failures",
            "Reconcile phases that failed (logged; the next pass retries them).",
            ("phase",),
            registry=self.registry,
        )

    def add_collector(self, collector: Collector) -> None:
        """Render ``collector``'s families with the instruments on every scrape."""
        self.registry.register(collector)

    def observe_pass(self, phase_s: Mapping[str, float], failed: list[str]) -> None:
        """Record one reconcile pass: each phase's duration and the phases that failed."""
        self.reconcile_pass.observe(sum(phase_s.values()))
        for phase, seconds in phase_s.items():
            self.reconcile_phase.labels(phase).observe(seconds)
        for phase in failed:
            self.reconcile_failures.labels(phase).inc()

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format (collectors read the store: call it off
        the event loop)."""
        return generate_latest(self.registry)
