"""What the planner is asked: the job, the sites it spreads over and the circuits between them.

Every figure is explicit, with a documented default (``docs/planner.md``), so that a
published run can be re-entered and its reported numbers checked.  The inputs validate
themselves; the model in :mod:`onecluster.planner._modes` trusts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from onecluster.errors import ValidationError
from onecluster.planner._gpus import peak_tflops

__all__ = [
    "BITS",
    "GPUS_PER_NODE",
    "KM_PER_RTT_MS",
    "PlanInputs",
    "SitePlan",
    "WanHop",
]

#: Pseudo-gradient widths DiLoCo sends: fp32, bf16/fp16, int8 (INTELLECT-1), 4-bit (Streaming).
BITS = (4, 8, 16, 32)

#: Fibre route per millisecond of RTT: 9.8 µs/km round trip in G.652 fibre (``fabric.md`` §0).
KM_PER_RTT_MS = 102.0

#: GPUs per node unless ``--gpus-per-node`` says otherwise (HGX nodes).
GPUS_PER_NODE = 8

_MIB = 1 << 20


def _positive(what: str, value: float) -> None:
    if isinstance(value, bool) or not value > 0 or math.isinf(value):
        msg = f"{what} must be a finite number greater than 0 (got {value})"
        raise ValidationError(msg)


def _non_negative(what: str, value: float) -> None:
    if isinstance(value, bool) or not value >= 0 or math.isinf(value):
        msg = f"{what} must be a finite number, not negative (got {value})"
        raise ValidationError(msg)


def _whole(what: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{what} must be a whole number of at least 1 (got {value})"
        raise ValidationError(msg)


@dataclass(frozen=True, slots=True)
class SitePlan:
    """One site of the plan and the GPUs the job would use there."""

    name: str
    gpus: int

    def __post_init__(self) -> None:
        if not self.name:
            msg = "a site of the plan needs a name"
            raise ValidationError(msg)
        _whole(f"the GPUs at site {self.name}", self.gpus)


@dataclass(frozen=True, slots=True, kw_only=True)
class WanHop:
    """The circuits between two sites, seen as one link: capacities add, the slowest RTT counts.

    ``distance_km`` of 0 means unknown: :attr:`distance` then estimates it from the RTT.
    """

    a: str
    b: str
    rtt_ms: float
    capacity_gbps: float
    distance_km: float = 0.0
    circuits: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.a == self.b:
            msg = f"a WAN hop joins two different sites (got {self.a} twice)"
            raise ValidationError(msg)
        _positive(f"the RTT between {self.a} and {self.b} (ms)", self.rtt_ms)
        _positive(f"the capacity between {self.a} and {self.b} (Gbit/s)", self.capacity_gbps)
        _non_negative(f"the distance between {self.a} and {self.b} (km)", self.distance_km)

    @property
    def distance(self) -> tuple[float, str]:
        """Route length in km and where it comes from: ``"fabric"`` or ``"rtt"`` (estimated)."""
        if self.distance_km > 0:
            return self.distance_km, "fabric"
        return self.rtt_ms * KM_PER_RTT_MS, "rtt"

    def joins(self, x: str, y: str) -> bool:
        """Whether this hop runs between ``x`` and ``y`` (either direction)."""
        return {self.a, self.b} == {x, y}

    def to_json(self) -> dict[str, Any]:
        """The hop as plain JSON values."""
        km, source = self.distance
        return {
            "a": self.a,
            "b": self.b,
            "circuits": list(self.circuits),
            "rtt_ms": self.rtt_ms,
            "capacity_gbps": self.capacity_gbps,
            "distance_km": km,
            "distance_source": source,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanInputs:
    """A job spread over sites, and the figures the model needs; validated on construction.

    ``sites`` are in ring order and ``hops[j]`` joins ``sites[j]`` to the next site (with two
    sites, one hop used both ways).  ``None`` means "the documented default": ``nic_gbps``
    is the circuit's capacity shared equally by the site's nodes, ``streams_per_node`` is 8
    connections per GPU (NCCL's channels, ``fabric.md`` §4.6), ``step_time_s`` is the FLOPs
    formula 6·P·tokens / (GPUs · peak · MFU).
    """

    model_params: float
    sites: tuple[SitePlan, ...]
    hops: tuple[WanHop, ...]
    gpu_type: str = "H100"
    gpu_tflops: float | None = None
    mfu: float = 0.40
    tokens_per_step: float = 4 * _MIB
    step_time_s: float | None = None
    gpus_per_node: int = GPUS_PER_NODE
    nic_gbps: float | None = None
    intra_gbps: float = 400.0
    bytes_per_param: float = 2.0
    h: int = 100
    bits: int = 8
    buckets: int = 1
    overlap: float = 0.0
    window_bytes: float = 4 * _MIB
    streams_per_node: int | None = None
    detection_timeout_s: float = 5.0
    state_bytes_per_param: float = 6.0
    rejoin_overhead_s: float = 10.0
    target_penalty: float = 0.05
    _peak: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _positive("--model-params", self.model_params)
        if self.gpu_tflops is not None:
            _positive("--gpu-tflops", self.gpu_tflops)
        object.__setattr__(self, "_peak", peak_tflops(self.gpu_type, self.gpu_tflops))
        _positive("--mfu", self.mfu)
        if self.mfu > 1:
            msg = f"--mfu is a fraction of peak, at most 1 (got {self.mfu})"
            raise ValidationError(msg, hint="e.g. --mfu 0.4 for 40 %")
        _positive("--tokens-per-step", self.tokens_per_step)
        if self.step_time_s is not None:
            _positive("--step-time-s", self.step_time_s)
        _whole("--gpus-per-node", self.gpus_per_node)
        if self.nic_gbps is not None:
            _positive("--nic-gbps", self.nic_gbps)
        _positive("--intra-gbps", self.intra_gbps)
        _positive("--bytes-per-param", self.bytes_per_param)
        _whole("--h", self.h)
        if self.bits not in BITS:
            msg = f"--bits must be one of {', '.join(map(str, BITS))} (got {self.bits})"
            raise ValidationError(msg, hint="32 fp32, 16 bf16, 8 int8, 4 four-bit")
        _whole("--buckets", self.buckets)
        _non_negative("--overlap", self.overlap)
        if self.overlap > 1:
            msg = f"--overlap is a fraction of the step's compute, at most 1 (got {self.overlap})"
            raise ValidationError(msg)
        _positive("--window-bytes", self.window_bytes)
        if self.streams_per_node is not None:
            _whole("--streams-per-node", self.streams_per_node)
        _positive("--detection-timeout-s", self.detection_timeout_s)
        _positive("--state-bytes-per-param", self.state_bytes_per_param)
        _non_negative("--rejoin-overhead-s", self.rejoin_overhead_s)
        _positive("--target-penalty", self.target_penalty)
        self._check_sites()

    def _check_sites(self) -> None:
        names = [s.name for s in self.sites]
        if len(names) < 2:
            msg = f"a plan spreads a job over at least two sites (got {len(names)})"
            raise ValidationError(msg, hint="name two or more sites with --sites")
        if len(set(names)) != len(names):
            msg = f"a site is named twice in the plan: {', '.join(names)}"
            raise ValidationError(msg)
        for s in self.sites:
            if s.gpus % self.gpus_per_node:
                msg = (
                    f"site {s.name} gets {s.gpus} GPUs, not a whole number of "
                    f"{self.gpus_per_node}-GPU nodes"
                )
                raise ValidationError(msg, hint="give a multiple of --gpus-per-node")
        expected = 1 if len(names) == 2 else len(names)
        if len(self.hops) != expected:
            msg = f"{len(names)} sites need {expected} WAN hops in ring order, got {len(self.hops)}"
            raise ValidationError(msg)
        for j, hop in enumerate(self.hops):
            here, there = names[j], names[(j + 1) % len(names)]
            if not hop.joins(here, there):
                msg = f"WAN hop {j} joins {hop.a}-{hop.b}, but the ring needs {here}-{there}"
                raise ValidationError(msg)

    # -- derived figures ------------------------------------------------------------------

    @property
    def peak(self) -> float:
        """Peak TFLOP/s per GPU used by the plan."""
        return self._peak

    @property
    def total_gpus(self) -> int:
        """GPUs over every site."""
        return sum(s.gpus for s in self.sites)

    def nodes(self, site: SitePlan) -> int:
        """Nodes the job uses at ``site``."""
        return site.gpus // self.gpus_per_node

    @property
    def total_nodes(self) -> int:
        """Nodes over every site."""
        return sum(self.nodes(s) for s in self.sites)

    @property
    def streams(self) -> int:
        """Parallel WAN connections per node (8 per GPU unless given)."""
        return self.streams_per_node or 8 * self.gpus_per_node

    @property
    def step_compute_s(self) -> float:
        """One inner step's compute: measured, or 6·P·tokens / (GPUs · peak · MFU)."""
        if self.step_time_s is not None:
            return self.step_time_s
        flops = 6.0 * self.model_params * self.tokens_per_step
        return flops / (self.total_gpus * self.peak * 1e12 * self.mfu)

    @property
    def gradient_bytes(self) -> float:
        """One full gradient on the wire (G = P · bytes per parameter)."""
        return self.model_params * self.bytes_per_param

    @property
    def pseudo_gradient_bytes(self) -> float:
        """One DiLoCo pseudo-gradient on the wire (Δ = P · bits / 8)."""
        return self.model_params * self.bits / 8

    @property
    def state_bytes(self) -> float:
        """What a rejoining site fetches: parameters and outer optimiser state."""
        return self.model_params * self.state_bytes_per_param

    def hop_from(self, j: int) -> WanHop:
        """The hop a site sends on: ``sites[j]`` to the next site of the ring."""
        return self.hops[j % len(self.hops)]

    def to_json(self) -> dict[str, Any]:
        """Every input, defaults resolved, as plain JSON values."""
        return {
            "model_params": self.model_params,
            "sites": {s.name: s.gpus for s in self.sites},
            "gpu_type": self.gpu_type,
            "gpu_tflops": self.peak,
            "mfu": self.mfu,
            "tokens_per_step": self.tokens_per_step,
            "step_time_s": self.step_time_s,
            "gpus_per_node": self.gpus_per_node,
            "nic_gbps": self.nic_gbps,
            "intra_gbps": self.intra_gbps,
            "bytes_per_param": self.bytes_per_param,
            "h": self.h,
            "bits": self.bits,
            "buckets": self.buckets,
            "overlap": self.overlap,
            "window_bytes": self.window_bytes,
            "streams_per_node": self.streams,
            "detection_timeout_s": self.detection_timeout_s,
            "state_bytes_per_param": self.state_bytes_per_param,
            "rejoin_overhead_s": self.rejoin_overhead_s,
            "target_penalty": self.target_penalty,
        }
