"""The three ways to train across sites, each as step time, penalty and WAN traffic.

- **DDP, flat ring** (``ddp-flat``): one NCCL ring over every node of every site, synced
  every step.  The ring crosses each site boundary between one pair of nodes, so one node's
  share of the circuit carries the whole site's egress, 2(n−1)/n · G, and each of the ring's
  2(n−1) steps waits for the WAN's one-way delay.
- **DDP, hierarchical** (``ddp-hierarchical``): reduce-scatter inside each site, one
  all-reduce of the gradient shards across sites (a ring over the sites, sharded over every
  node), all-gather inside.  Egress per site 2(S−1)/S · G, 2(S−1) WAN steps per call.
- **DiLoCo(H, bits)** (``diloco``): sites train alone for H inner steps, then all-reduce the
  pseudo-gradient, P · bits / 8 bytes, as hierarchical DDP does; the step blocks meanwhile.
  **Streaming** (``diloco-streaming``) overlaps the sync with the next H steps' compute, so
  only max(0, sync − H · step) stalls.

The co-located reference is the same job in one site with the same MFU: its in-site
communication is already inside the step compute, so a mode's penalty is only what the WAN
adds (``fabric.md`` §4.4 step 6).  The in-site part of hierarchical DDP is reported, not
counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onecluster.planner._collectives import (
    NCCL_BASE_S,
    NET_STEP_S,
    WanRate,
    all_gather_s,
    reduce_scatter_s,
    ring_allreduce_s,
    wan_alpha_s,
    wan_rate,
)
from onecluster.planner._inputs import PlanInputs

__all__ = [
    "DDP_FLAT",
    "DDP_HIERARCHICAL",
    "DILOCO",
    "DILOCO_STREAMING",
    "MODES",
    "ModeResult",
    "all_modes",
    "ddp_flat",
    "ddp_hierarchical",
    "diloco",
]

DDP_FLAT = "ddp-flat"
DDP_HIERARCHICAL = "ddp-hierarchical"
DILOCO = "diloco"
DILOCO_STREAMING = "diloco-streaming"
#: Every mode, in the order the verdict prefers them (``_verdict.py``).
MODES = (DDP_HIERARCHICAL, DDP_FLAT, DILOCO, DILOCO_STREAMING)

# A penalty this close to the target meets it: the figures are sums of floats.
_EPSILON = 1e-12


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeResult:
    """One mode's prediction.  Times are seconds, per sync unless named per step.

    ``interval_steps`` inner steps pass between two cross-site syncs (1 for DDP, H for
    DiLoCo); ``hidden_s`` is the compute a sync may overlap; ``wan_bytes_per_site`` is the
    busiest site's egress per sync, sent by ``sending_nodes`` of its nodes at ``rate``.
    """

    mode: str
    label: str
    blocking: bool
    interval_steps: int
    compute_s: float
    bandwidth_s: float
    latency_s: float
    hidden_s: float
    wan_bytes_per_site: float
    sending_nodes: int
    rate: WanRate
    target_penalty: float
    in_site_s: float = 0.0

    @property
    def sync_s(self) -> float:
        """One cross-site sync: bandwidth term plus latency term."""
        return self.bandwidth_s + self.latency_s

    @property
    def stall_s(self) -> float:
        """What one sync adds to the wall clock: the part compute does not hide."""
        return max(0.0, self.sync_s - self.hidden_s)

    @property
    def step_s(self) -> float:
        """Average wall time of one inner step, the syncs' stalls spread over the interval."""
        return self.compute_s + self.stall_s / self.interval_steps

    @property
    def penalty(self) -> float:
        """t_step(multi-site) / t_step(co-located) − 1."""
        return self.stall_s / (self.interval_steps * self.compute_s)

    @property
    def utilisation(self) -> float:
        """Share of the wall clock spent computing, against the co-located run (1 = parity)."""
        return self.compute_s / self.step_s

    @property
    def meets_target(self) -> bool:
        """Whether the penalty stays at or under the target."""
        return self.penalty <= self.target_penalty + _EPSILON

    @property
    def binding(self) -> str:
        """What limits the sync: ``latency`` when its latency term is the larger, else the
        rate's binding limit (``circuit``, ``nic`` or ``window``)."""
        return "latency" if self.latency_s > self.bandwidth_s else self.rate.binding

    @property
    def average_gbps_per_site(self) -> float:
        """Egress the site must sustain to keep pace with compute: 8·bytes / (interval · step)
        (``training.md`` §2.2's B_site)."""
        return self.wan_bytes_per_site * 8 / (self.interval_steps * self.compute_s) / 1e9

    @property
    def average_gbps_per_node(self) -> float:
        """:attr:`average_gbps_per_site` per sending node."""
        return self.average_gbps_per_site / self.sending_nodes

    @property
    def needed_gbps_per_site(self) -> float | None:
        """The rate a sync must run at for the penalty to meet the target (the burst of a
        blocking sync); ``None`` when the latency term alone spends the whole budget."""
        budget = (
            self.target_penalty * self.interval_steps * self.compute_s
            + self.hidden_s
            - self.latency_s
        )
        if budget <= 0:
            return None
        return self.wan_bytes_per_site * 8 / budget / 1e9

    @property
    def needed_gbps_per_node(self) -> float | None:
        """:attr:`needed_gbps_per_site` per sending node."""
        needed = self.needed_gbps_per_site
        return None if needed is None else needed / self.sending_nodes

    def to_json(self) -> dict[str, Any]:
        """Every figure of the mode as plain JSON values."""
        return {
            "mode": self.mode,
            "label": self.label,
            "blocking": self.blocking,
            "interval_steps": self.interval_steps,
            "step_s": self.step_s,
            "compute_s": self.compute_s,
            "utilisation": self.utilisation,
            "penalty": self.penalty,
            "meets_target": self.meets_target,
            "sync_s": self.sync_s,
            "bandwidth_s": self.bandwidth_s,
            "latency_s": self.latency_s,
            "hidden_s": self.hidden_s,
            "stall_s": self.stall_s,
            "in_site_s": self.in_site_s,
            "binding": self.binding,
            "wan_bytes_per_site": self.wan_bytes_per_site,
            "sending_nodes": self.sending_nodes,
            "average_gbps_per_site": self.average_gbps_per_site,
            "average_gbps_per_node": self.average_gbps_per_node,
            "needed_gbps_per_site": self.needed_gbps_per_site,
            "needed_gbps_per_node": self.needed_gbps_per_node,
            "rate": self.rate.to_json(),
        }


def _slowest(inputs: PlanInputs, nbytes: float, *, one_node: bool) -> tuple[float, WanRate, int]:
    """The bandwidth term of sending ``nbytes`` from every site at once: the slowest site's
    time, its rate and its sending nodes."""
    worst: tuple[float, WanRate, int] | None = None
    for j, site in enumerate(inputs.sites):
        sending = 1 if one_node else inputs.nodes(site)
        rate = wan_rate(inputs, j, sending_nodes=sending)
        seconds = nbytes / rate.bytes_per_s
        if worst is None or seconds > worst[0]:
            worst = (seconds, rate, sending)
    assert worst is not None  # PlanInputs holds at least two sites
    return worst


def _max_alpha(inputs: PlanInputs) -> float:
    return max(wan_alpha_s(h) for h in inputs.hops)


def _site_share(inputs: PlanInputs) -> float:
    """k = 2(S−1)/S: a site's egress per all-reduce over S sites, in full copies."""
    s = len(inputs.sites)
    return 2 * (s - 1) / s


def ddp_flat(inputs: PlanInputs) -> ModeResult:
    """Per-step DDP over one ring of every node (NCCL's flat ring across sites)."""
    n = inputs.total_nodes
    nbytes = 2 * (n - 1) / n * inputs.gradient_bytes
    _, rate, sending = _slowest(inputs, nbytes, one_node=True)
    # The ring's pace is its WAN edge: every one of its 2(n−1) steps waits for it.
    bandwidth_s = ring_allreduce_s(inputs.gradient_bytes, n, rate.bytes_per_s, 0.0)
    per_call = ring_allreduce_s(0.0, n, rate.bytes_per_s, _max_alpha(inputs))
    latency_s = inputs.buckets * (NCCL_BASE_S + per_call)
    return ModeResult(
        mode=DDP_FLAT,
        label="DDP, flat ring",
        blocking=True,
        interval_steps=1,
        compute_s=inputs.step_compute_s,
        bandwidth_s=bandwidth_s,
        latency_s=latency_s,
        hidden_s=inputs.overlap * inputs.step_compute_s,
        wan_bytes_per_site=nbytes,
        sending_nodes=sending,
        rate=rate,
        target_penalty=inputs.target_penalty,
    )


def ddp_hierarchical(inputs: PlanInputs) -> ModeResult:
    """Per-step DDP: reduce in site, one cross-site all-reduce of the shards, gather in site."""
    nbytes = _site_share(inputs) * inputs.gradient_bytes
    bandwidth_s, rate, sending = _slowest(inputs, nbytes, one_node=False)
    wan_steps = 2 * (len(inputs.sites) - 1)
    latency_s = inputs.buckets * (NCCL_BASE_S + wan_steps * _max_alpha(inputs))
    node_bytes_per_s = inputs.intra_gbps * inputs.gpus_per_node * 1e9 / 8
    in_site_s = max(
        reduce_scatter_s(inputs.gradient_bytes, inputs.nodes(s), node_bytes_per_s, NET_STEP_S)
        + all_gather_s(inputs.gradient_bytes, inputs.nodes(s), node_bytes_per_s, NET_STEP_S)
        for s in inputs.sites
    )
    return ModeResult(
        mode=DDP_HIERARCHICAL,
        label="DDP, hierarchical",
        blocking=True,
        interval_steps=1,
        compute_s=inputs.step_compute_s,
        bandwidth_s=bandwidth_s,
        latency_s=latency_s,
        hidden_s=inputs.overlap * inputs.step_compute_s,
        wan_bytes_per_site=nbytes,
        sending_nodes=sending,
        rate=rate,
        target_penalty=inputs.target_penalty,
        in_site_s=in_site_s,
    )


def diloco(inputs: PlanInputs, *, streaming: bool = False) -> ModeResult:
    """DiLoCo(H, bits): one sharded all-reduce of the pseudo-gradient every H inner steps,
    blocking, or overlapped with the next H steps when ``streaming``."""
    nbytes = _site_share(inputs) * inputs.pseudo_gradient_bytes
    bandwidth_s, rate, sending = _slowest(inputs, nbytes, one_node=False)
    latency_s = NCCL_BASE_S + 2 * (len(inputs.sites) - 1) * _max_alpha(inputs)
    compute_s = inputs.step_compute_s
    name = f"DiLoCo H={inputs.h}, {inputs.bits}-bit"
    return ModeResult(
        mode=DILOCO_STREAMING if streaming else DILOCO,
        label=f"{name}, streaming" if streaming else name,
        blocking=not streaming,
        interval_steps=inputs.h,
        compute_s=compute_s,
        bandwidth_s=bandwidth_s,
        latency_s=latency_s,
        hidden_s=inputs.h * compute_s if streaming else 0.0,
        wan_bytes_per_site=nbytes,
        sending_nodes=sending,
        rate=rate,
        target_penalty=inputs.target_penalty,
    )


def all_modes(inputs: PlanInputs) -> tuple[ModeResult, ...]:
    """Every mode's prediction, in :data:`MODES` order."""
    return (
        ddp_hierarchical(inputs),
        ddp_flat(inputs),
        diloco(inputs),
        diloco(inputs, streaming=True),
    )
