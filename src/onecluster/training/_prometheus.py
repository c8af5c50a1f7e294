"""A worker's Prometheus ``/metrics``: what :meth:`CrossSite.stats` counts, read at scrape
time, and the durations of :attr:`CrossSite.timings`.

The launcher's ``--prometheus HOST:PORT`` gives worker *i* of the site ``HOST:PORT+i`` (port
0: any free one each) in ``$ONECLUSTER_TRAINING_PROMETHEUS``; a worker script calls
:func:`serve_metrics` with its environment once its :class:`CrossSite` exists.  Names::

    onecluster_training_inner_step                   gauge: inner steps taken
    onecluster_training_outer_step                   gauge: outer rounds merged (the run's)
    onecluster_training_wan_sent_bytes_total         every byte sent to other sites
    onecluster_training_wan_received_bytes_total     every byte received from them
    onecluster_training_sites_lost_total             {peer}: a peer site lost
    onecluster_training_sites_rejoined_total         {peer}: a lost peer site back
    onecluster_training_heals_total                  this worker took a peer's state
    onecluster_training_step_duration_seconds        histogram, see RunTimings
    onecluster_training_outer_sync_duration_seconds  histogram, see RunTimings
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from onecluster.errors import ValidationError
from onecluster.telemetry import MetricsServer
from onecluster.training._crosssite import CrossSite

__all__ = ["PROMETHEUS_ENV", "TrainingCollector", "prometheus_address", "serve_metrics"]

#: ``HOST:PORT`` of this worker's ``/metrics``, set by the launcher's ``--prometheus``.
PROMETHEUS_ENV = "ONECLUSTER_TRAINING_PROMETHEUS"


def prometheus_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as a host and a port (0..65535); a :class:`ValidationError` otherwise."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValidationError(
            f"the Prometheus address {text!r} is not HOST:PORT", hint="e.g. 0.0.0.0:9470"
        )
    return host.strip("[]"), int(port)


class TrainingCollector(Collector):
    """``cross``'s counters and histograms, read at every scrape."""

    def __init__(self, cross: CrossSite) -> None:
        self._cross = cross

    def collect(self) -> Iterator[Metric]:
        s = self._cross.stats()
        yield GaugeMetricFamily(
            "onecluster_training_inner_step", "Inner steps this worker took", value=s.inner_steps
        )
        yield GaugeMetricFamily(
            "onecluster_training_outer_step", "Outer rounds merged into the run", value=s.rounds
        )
        yield CounterMetricFamily(
            "onecluster_training_wan_sent_bytes", "Bytes sent to other sites", value=s.wan_sent
        )
        yield CounterMetricFamily(
            "onecluster_training_wan_received_bytes",
            "Bytes received from other sites",
            value=s.wan_received,
        )
        yield CounterMetricFamily(
            "onecluster_training_heals", "Times this worker took a peer's state", value=s.heals
        )
        for name, doc, counts in (
            ("sites_lost", "Times a peer site was lost", s.sites_lost),
            ("sites_rejoined", "Times a lost peer site came back", s.sites_rejoined),
        ):
            family = CounterMetricFamily(f"onecluster_training_{name}", doc, labels=["peer"])
            for peer, n in sorted(counts.items()):
                family.add_metric([peer], n)
            yield family
        yield from self._cross.timings.step.collect()
        yield from self._cross.timings.outer_sync.collect()


def serve_metrics(cross: CrossSite, environ: Mapping[str, str]) -> MetricsServer | None:
    """``GET /metrics`` of ``cross`` where ``environ[PROMETHEUS_ENV]`` says, in a daemon
    thread until its ``close()``; ``None`` when it is unset.  A :class:`ValidationError` for
    a malformed address, a :class:`BackendError` when it cannot listen there (the launcher
    restarts the worker: a port still held may be free by then)."""
    raw = environ.get(PROMETHEUS_ENV, "").strip()
    if not raw:
        return None
    host, port = prometheus_address(raw)
    return MetricsServer([TrainingCollector(cross)], host, port, option="--prometheus")
