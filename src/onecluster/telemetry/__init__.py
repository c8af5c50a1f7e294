"""Link measurement: active UDP probes of every circuit (RTT, RFC 3550 jitter, PDV
percentiles, loss) and their Prometheus exposition."""

from onecluster.telemetry._exporter import MetricsServer, ProbeCollector
from onecluster.telemetry._prober import (
    DEFAULT_PROBE_PORT,
    CircuitSnapshot,
    Heard,
    Liveness,
    PeerEndpoint,
    Prober,
)
from onecluster.telemetry._window import RTT_BUCKETS_S, LinkFigures, Outcome, ProbeWindow
from onecluster.telemetry._wire import PACKET_SIZE, Packet, decode, encode

__all__ = [
    "DEFAULT_PROBE_PORT",
    "PACKET_SIZE",
    "RTT_BUCKETS_S",
    "CircuitSnapshot",
    "Heard",
    "LinkFigures",
    "Liveness",
    "MetricsServer",
    "Outcome",
    "Packet",
    "PeerEndpoint",
    "ProbeCollector",
    "ProbeWindow",
    "Prober",
    "decode",
    "encode",
]
