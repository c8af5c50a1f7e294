"""The critic's three numbers (``training.md`` §2): link distance, bandwidth per node under
training traffic, and expected recovery time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onecluster.planner._collectives import wan_rate
from onecluster.planner._inputs import PlanInputs
from onecluster.planner._modes import ModeResult

__all__ = ["CriticNumbers", "Recovery", "critic_numbers", "recovery"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """What a lost or returning site costs (``training.md`` §2.3 and §6.3, item 3).

    Survivors commit again within the detection timeout plus one outer interval; a site
    that returns fetches the state from a healthy peer over its WAN rate and pays a fixed
    overhead; a lost site loses at most one interval of steps.
    """

    detection_s: float
    survivors_s: float
    rejoin_s: float
    state_bytes: float
    rejoin_gbps: float
    steps_lost_at_most: int

    def to_json(self) -> dict[str, Any]:
        """The recovery figures as plain JSON values."""
        return {
            "detection_s": self.detection_s,
            "survivors_s": self.survivors_s,
            "rejoin_s": self.rejoin_s,
            "state_bytes": self.state_bytes,
            "rejoin_gbps": self.rejoin_gbps,
            "steps_lost_at_most": self.steps_lost_at_most,
        }


def recovery(inputs: PlanInputs, mode: ModeResult) -> Recovery:
    """Recovery under ``mode``: detection + one interval of its steps for the survivors;
    state bytes over the slowest site's sharded WAN rate + the fixed overhead to rejoin."""
    rate = min(wan_rate(inputs, j).per_site_gbps for j in range(len(inputs.sites)))
    return Recovery(
        detection_s=inputs.detection_timeout_s,
        survivors_s=inputs.detection_timeout_s + mode.interval_steps * mode.step_s,
        rejoin_s=inputs.state_bytes * 8 / (rate * 1e9) + inputs.rejoin_overhead_s,
        state_bytes=inputs.state_bytes,
        rejoin_gbps=rate,
        steps_lost_at_most=mode.interval_steps,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CriticNumbers:
    """The three numbers a critic asks of a cross-site training claim, for one mode.

    Distance is the longest hop's route (the fabric's ``distance_km``, else RTT × 102
    km/ms).  Bandwidth per node is the average that keeps pace with compute and, for a
    blocking sync, the burst that keeps the penalty at the target, beside what the WAN
    gives a node and what the site's own network gives it (their ratio is the cross-site
    oversubscription, ``fabric.md`` §4.6).
    """

    mode: str
    link_distance_km: float
    distance_source: str
    rtt_ms: float
    average_gbps_per_node: float
    burst_gbps_per_node: float | None
    available_gbps_per_node: float
    in_site_gbps_per_node: float
    recovery: Recovery

    @property
    def oversubscription(self) -> float:
        """In-site bandwidth per node over the WAN bandwidth a node gets."""
        return self.in_site_gbps_per_node / self.available_gbps_per_node

    def to_json(self) -> dict[str, Any]:
        """The three numbers as plain JSON values."""
        return {
            "mode": self.mode,
            "link_distance_km": self.link_distance_km,
            "distance_source": self.distance_source,
            "rtt_ms": self.rtt_ms,
            "bandwidth_per_node": {
                "average_gbps": self.average_gbps_per_node,
                "burst_gbps": self.burst_gbps_per_node,
                "available_gbps": self.available_gbps_per_node,
                "in_site_gbps": self.in_site_gbps_per_node,
                "oversubscription": self.oversubscription,
            },
            "recovery": self.recovery.to_json(),
        }


def critic_numbers(inputs: PlanInputs, mode: ModeResult) -> CriticNumbers:
    """The critic's three numbers for ``mode`` (the verdict's, or the closest one)."""
    longest = max(inputs.hops, key=lambda h: h.distance[0])
    km, source = longest.distance
    return CriticNumbers(
        mode=mode.mode,
        link_distance_km=km,
        distance_source=source,
        rtt_ms=max(h.rtt_ms for h in inputs.hops),
        average_gbps_per_node=mode.average_gbps_per_node,
        burst_gbps_per_node=mode.needed_gbps_per_node if mode.blocking else None,
        available_gbps_per_node=mode.rate.per_node_gbps,
        in_site_gbps_per_node=inputs.intra_gbps * inputs.gpus_per_node,
        recovery=recovery(inputs, mode),
    )
