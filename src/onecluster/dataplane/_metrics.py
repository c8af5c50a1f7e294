"""The data plane's Prometheus metrics of one process: what its fetches received and its
data endpoint served, over every transfer the process ran.

Transfers come and go (their own counters go with them, see :class:`Fetch`); these are the
process's totals since it started, so they only grow.  Labels are the far site (``peer``:
the source for what was fetched, the receiver for what was served) and the path's kind
(``path``: ``direct`` or ``relay``), never a transfer::

    onecluster_dataplane_received_bytes_total         chunk payloads fetched (wire bytes)
    onecluster_dataplane_sent_bytes_total             chunk payloads served (wire bytes)
    onecluster_dataplane_relayed_bytes_total          bytes spliced by this site's relays
    onecluster_dataplane_chunks_fetched_total         chunks that arrived
    onecluster_dataplane_chunks_verified_total        chunks whose digest matched
    onecluster_dataplane_chunk_verify_failures_total  chunks that arrived corrupt
    onecluster_dataplane_chunks_served_total          chunks sent
    onecluster_dataplane_connect_retries_total        stream connections that failed
    onecluster_dataplane_reconnects_total             streams opened again after a break
    onecluster_dataplane_streams                      {role="fetch"|"serve"} open now
    onecluster_dataplane_chunk_fetch_duration_seconds request sent → chunk verified
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["FETCH_BUCKETS_S", "DataPlaneMetrics", "PathKind", "path_kind", "site_label"]

PathKind = Literal["direct", "relay"]

#: A chunk's fetch, from its request to its verification: a millisecond on a LAN, seconds
#: behind a batch of 8 MiB on a paced intercontinental path.
FETCH_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

_FLOW = ("peer", "path")
_SITE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")  # as model._checks names a site


def path_kind(hops: int) -> PathKind:
    """``direct`` for a path of one hop (the source itself), else ``relay``."""
    return "direct" if hops <= 1 else "relay"


def site_label(value: object) -> str:
    """A site's name as a label value; ``unknown`` for anything else (a peer of an older
    version says nothing, and a label must never carry arbitrary text)."""
    return value if isinstance(value, str) and _SITE.fullmatch(value) else "unknown"


class DataPlaneMetrics(Collector):
    """The counters of one process's data plane (see the module docstring); thread-safe.

    One instance per process, shared by its :class:`DataServer` and every :class:`Fetch`;
    register it in the process's registry to export it.
    """

    def __init__(self) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = _FLOW) -> Counter:
            return Counter(f"onecluster_dataplane_{name}", doc, labels, registry=None)

        self.received_bytes = counter("received_bytes", "Chunk payload bytes fetched")
        self.sent_bytes = counter("sent_bytes", "Chunk payload bytes served")
        self.relayed_bytes = counter("relayed_bytes", "Bytes spliced by this site's relays", ())
        self.chunks_fetched = counter("chunks_fetched", "Chunks that arrived")
        self.chunks_verified = counter("chunks_verified", "Chunks whose digest matched")
        self.verify_failures = counter("chunk_verify_failures", "Chunks that arrived corrupt")
        self.chunks_served = counter("chunks_served", "Chunks sent to a receiver")
        self.connect_retries = counter(
            "connect_retries", "Stream connections that failed (retried after a backoff)"
        )
        self.reconnects = counter("reconnects", "Streams opened again after their path broke")
        self.streams = Gauge(
            "onecluster_dataplane_streams",
            "Data streams open now",
            ("role", *_FLOW),
            registry=None,
        )
        self.fetch_duration = Histogram(
            "onecluster_dataplane_chunk_fetch_duration_seconds",
            "A chunk's fetch, from its batch's request to its verification",
            _FLOW,
            buckets=FETCH_BUCKETS_S,
            registry=None,
        )

    def collect(self) -> Iterator[Metric]:
        for metric in (
            self.received_bytes,
            self.sent_bytes,
            self.relayed_bytes,
            self.chunks_fetched,
            self.chunks_verified,
            self.verify_failures,
            self.chunks_served,
            self.connect_retries,
            self.reconnects,
            self.streams,
            self.fetch_duration,
        ):
            yield from metric.collect()
