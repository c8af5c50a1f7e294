"""The gateway's Prometheus metrics, in a registry of its own (one per gateway, not global)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from onecluster.gateway._config import NANO
from onecluster.gateway._records import CallRecord

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

        self._children: dict[tuple[str, str, str], tuple[Any, Any, Any, Any]] = {}

    def count(self, record: CallRecord) -> None:
        """Count a settled call (label children are cached: this is on every call's path)."""
        key = (record.team, record.model, record.outcome)
        children = self._children.get(key)
        if children is None:
            children = (
                self.calls.labels(*key),
                self.tokens.labels(record.team, record.model, "prompt"),
                self.tokens.labels(record.team, record.model, "completion"),
                self.cost.labels(record.team),
            )
            self._children[key] = children
        calls, prompt, completion, cost = children
        calls.inc()
        prompt.inc(record.prompt_tokens)
        completion.inc(record.completion_tokens)
        cost.inc(record.cost / NANO)
        self.overhead.observe(record.overhead_ms / 1000)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
