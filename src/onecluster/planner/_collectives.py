"""α-β (Hockney) costs of the collectives, and the rate a site can push over its WAN hop.

Formulas from Thakur, Rabenseifner and Gropp (IJHPCA 2005) in the shape of NCCL's own cost
model (``NVIDIA/nccl src/graph/tuning.cc``: ``time = latency × steps + bytes / bandwidth``),
as summarised in ``fabric.md`` §4.1–4.2.  Sizes are bytes, bandwidths bytes per second and
times seconds; ``n`` counts ring members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onecluster.planner._inputs import PlanInputs, WanHop

__all__ = [
    "NCCL_BASE_S",
    "NET_STEP_S",
    "WanRate",
    "all_gather_s",
    "reduce_scatter_s",
    "ring_allreduce_s",
    "wan_alpha_s",
    "wan_rate",
]

#: NCCL's base latency of a Ring/Tree Simple collective (``baseLatencies``), once per call.
NCCL_BASE_S = 8.4e-6
#: NCCL's per-step latency over the network (``hwLatencies`` NET Ring Simple).
NET_STEP_S = 14e-6


def ring_allreduce_s(nbytes: float, n: int, bandwidth: float, alpha: float) -> float:
    """Ring all-reduce: 2(n−1)/n · S/B + 2(n−1)·α; zero for one member."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * alpha


def reduce_scatter_s(nbytes: float, n: int, bandwidth: float, alpha: float) -> float:
    """Ring reduce-scatter: (n−1)/n · S/B + (n−1)·α."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * nbytes / bandwidth + (n - 1) * alpha


def all_gather_s(nbytes: float, n: int, bandwidth: float, alpha: float) -> float:
    """Ring all-gather: the same cost as a reduce-scatter of the same buffer."""
    return reduce_scatter_s(nbytes, n, bandwidth, alpha)


def wan_alpha_s(hop: WanHop) -> float:
    """Per-step latency of a step that crosses ``hop``: its one-way delay plus NCCL's network
    step (``fabric.md`` §4.2: "add the DCI one-way delay to interLat")."""
    return hop.rtt_ms / 2000 + NET_STEP_S


@dataclass(frozen=True, slots=True)
class WanRate:
    """What one site can push over its ring hop, in Gbit/s, and which limit binds.

    ``binding`` is ``"circuit"`` (the hop's capacity), ``"nic"`` (the nodes' share of it) or
    ``"window"`` (streams × window / RTT per node); ties name the earlier of the three.
    """

    per_node_gbps: float
    per_site_gbps: float
    nic_gbps: float
    window_gbps: float
    circuit_gbps: float
    binding: str

    @property
    def bytes_per_s(self) -> float:
        """The site's rate in bytes per second."""
        return self.per_site_gbps * 1e9 / 8

    def to_json(self) -> dict[str, Any]:
        """The rate as plain JSON values."""
        return {
            "per_node_gbps": self.per_node_gbps,
            "per_site_gbps": self.per_site_gbps,
            "nic_gbps": self.nic_gbps,
            "window_gbps": self.window_gbps,
            "circuit_gbps": self.circuit_gbps,
            "binding": self.binding,
        }


def wan_rate(inputs: PlanInputs, j: int, *, sending_nodes: int | None = None) -> WanRate:
    """The rate at which ``inputs.sites[j]`` sends over its hop with ``sending_nodes`` nodes
    (default: all its nodes, a sync sharded HSDP-style; a flat ring crosses at one).

    ``fabric.md`` §4.4 step 3: min(circuit capacity, nodes × min(NIC share, streams × window
    / RTT)).  The NIC share defaults to the capacity divided by the site's nodes.
    """
    site = inputs.sites[j]
    hop = inputs.hop_from(j)
    nodes = inputs.nodes(site)
    sending = nodes if sending_nodes is None else sending_nodes
    nic = inputs.nic_gbps if inputs.nic_gbps is not None else hop.capacity_gbps / nodes
    window = inputs.streams * inputs.window_bytes * 8 / (hop.rtt_ms / 1000) / 1e9
    per_node = min(nic, window)
    per_site = min(hop.capacity_gbps, sending * per_node)
    if per_site >= hop.capacity_gbps:
        binding = "circuit"
    elif nic <= window:
        binding = "nic"
    else:
        binding = "window"
    return WanRate(
        per_node_gbps=per_site / sending,
        per_site_gbps=per_site,
        nic_gbps=nic,
        window_gbps=window,
        circuit_gbps=hop.capacity_gbps,
        binding=binding,
    )
