"""Prometheus exposition of the probes: a collector that reads :meth:`Prober.snapshot` at
scrape time (no second set of books), and the ``/metrics`` HTTP endpoint of a process's
collectors (an agent's: its probes' and its data plane's).

Names follow Prometheus conventions — base units (seconds, ratios), ``_total`` counters,
labels ``circuit`` and ``peer`` (the far site)::

    onecluster_link_probes_sent_total / _lost_total / _late_total
    onecluster_link_rtt_seconds                 histogram, 50 µs … 2.5 s buckets
    onecluster_link_rtt_min_seconds             minimum over the window
    onecluster_link_rtt_quantile_seconds        {quantile="0.5"|"0.99"}
    onecluster_link_pdv_seconds                 {quantile=…}: RTT minus the window minimum
    onecluster_link_jitter_seconds              RFC 3550 interarrival jitter
    onecluster_link_loss_ratio                  over the window
    onecluster_link_silent_seconds              since the last reply
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from onecluster.errors import BackendError
from onecluster.telemetry._prober import Prober
from onecluster.telemetry._window import RTT_BUCKETS_S

__all__ = ["MetricsServer", "ProbeCollector"]

_LABELS = ["circuit", "peer"]


class ProbeCollector(Collector):
    """Turns the prober's snapshot into metric families on every scrape."""

    def __init__(self, prober: Prober) -> None:
        self._prober = prober

    def collect(self) -> Iterator[Metric]:
        """The families, one sample per circuit."""
        sent = CounterMetricFamily("onecluster_link_probes_sent", "Probes sent", labels=_LABELS)
        lost = CounterMetricFamily(
            "onecluster_link_probes_lost", "Probes without a reply in time", labels=_LABELS
        )
        late = CounterMetricFamily(
            "onecluster_link_probes_late", "Replies after their timeout", labels=_LABELS
        )
        rtt = HistogramMetricFamily(
            "onecluster_link_rtt_seconds", "Round-trip time of probes", labels=_LABELS
        )
        rtt_min = GaugeMetricFamily(
            "onecluster_link_rtt_min_seconds", "Minimum RTT over the window", labels=_LABELS
        )
        rtt_q = GaugeMetricFamily(
            "onecluster_link_rtt_quantile_seconds",
            "RTT quantiles over the window",
            labels=[*_LABELS, "quantile"],
        )
        pdv = GaugeMetricFamily(
            "onecluster_link_pdv_seconds",
            "Packet delay variation (RTT minus the window minimum), quantiles",
            labels=[*_LABELS, "quantile"],
        )
        jitter = GaugeMetricFamily(
            "onecluster_link_jitter_seconds", "RFC 3550 interarrival jitter", labels=_LABELS
        )
        loss = GaugeMetricFamily(
            "onecluster_link_loss_ratio", "Lost probes over the window", labels=_LABELS
        )
        silent = GaugeMetricFamily(
            "onecluster_link_silent_seconds", "Seconds since the last reply", labels=_LABELS
        )
        for s in self._prober.snapshot():
            labels = [s.circuit, s.peer.site if s.peer else ""]
            f = s.figures
            sent.add_metric(labels, s.sent)
            lost.add_metric(labels, s.lost)
            late.add_metric(labels, s.late)
            cumulative, buckets = 0, []
            for bound, count in zip(RTT_BUCKETS_S, s.bucket_counts, strict=True):
                cumulative += count
                buckets.append((repr(bound), float(cumulative)))
            buckets.append(("+Inf", float(s.received)))
            rtt.add_metric(labels, buckets, s.rtt_sum_s)
            loss.add_metric(labels, f.loss)
            if f.rtt_min_s is not None:
                rtt_min.add_metric(labels, f.rtt_min_s)
            for q, rtt_value, pdv_value in (
                ("0.5", f.rtt_p50_s, f.pdv_p50_s),
                ("0.99", f.rtt_p99_s, f.pdv_p99_s),
            ):
                if rtt_value is not None and pdv_value is not None:
                    rtt_q.add_metric([*labels, q], rtt_value)
                    pdv.add_metric([*labels, q], pdv_value)
            if f.jitter_s is not None:
                jitter.add_metric(labels, f.jitter_s)
            if s.silent_s is not None:
                silent.add_metric(labels, s.silent_s)
        yield from (sent, lost, late, rtt, rtt_min, rtt_q, pdv, jitter, loss, silent)


class MetricsServer:
    """``GET /metrics`` of ``collectors`` on ``host:port`` (port 0: any free port) in a daemon
    thread; a :class:`BackendError` when it cannot listen there, whose hint names the
    command's ``option`` that chose the address."""

    def __init__(
        self, collectors: Iterable[Collector], host: str, port: int, *, option: str = "--metrics"
    ) -> None:
        self.registry = CollectorRegistry()
        for collector in collectors:
            self.registry.register(collector)
        try:
            server, thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            msg = f"cannot serve /metrics on {host}:{port}: {exc}"
            raise BackendError(msg, hint=f"choose another {option} address") from exc
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread

    @property
    def url(self) -> str:
        """Where the metrics are."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
