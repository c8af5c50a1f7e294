"""The gateway's Prometheus metrics, in a registry of its own (one per gateway, not global)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

__all__ = ["GatewayMetrics"]

_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1.0, 5.0, 30.0)


class GatewayMetrics:
    """Calls, tokens and cost per team and model; the gateway's own overhead; upstream time."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "onecluster_gateway_calls",
            "Calls answered, by team, model and outcome.",
            ("team", "model", "outcome"),
            registry=self.registry,
        )
        self.tokens = Counter(
            "onecluster_gateway_tokens",
            "Tokens billed, by team, model and kind (prompt or completion).",
            ("team", "model", "kind"),
            registry=self.registry,
        )
        self.cost = Counter(
            "onecluster_gateway_cost",
            "Cost billed in the bill's currency, by team.",
            ("team",),
            registry=self.registry,
        )
        self.refusals = Counter(
            "onecluster_gateway_refusals",
            "Calls refused before any upstream, by reason (rate_limited, forbidden, ...).",
            ("reason",),
            registry=self.registry,
        )
        self.overhead = Histogram(
            "onecluster_gateway_overhead_seconds",
            "Time the gateway itself spent on a call (upstream time excluded).",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.upstream = Histogram(
            "onecluster_gateway_upstream_seconds",
            "Time to the upstream's first byte, by upstream.",
            ("upstream",),
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
