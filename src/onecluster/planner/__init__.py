"""The planner: what spreading one training job over several sites costs (pure).

From an α-β model of the collectives and the circuits' RTT and capacity it predicts step
time, compute utilisation and WAN bandwidth for per-step DDP (flat and hierarchical) and
DiLoCo (blocking and streaming), says which mode keeps the penalty under a target, and gives
the critic's three numbers: link distance, bandwidth per node, recovery time.  It reads no
file: the CLI loads the fabric and passes it in (``docs/planner.md``).
"""

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
from onecluster.planner._gpus import PEAK_TFLOPS, peak_tflops
from onecluster.planner._inputs import (
    BITS,
    GPUS_PER_NODE,
    KM_PER_RTT_MS,
    PlanInputs,
    SitePlan,
    WanHop,
)
from onecluster.planner._links import MAX_RING_SITES, fabric_notes, hop_between, ring_from_fabric
from onecluster.planner._modes import (
    DDP_FLAT,
    DDP_HIERARCHICAL,
    DILOCO,
    DILOCO_STREAMING,
    MODES,
    ModeResult,
    all_modes,
    ddp_flat,
    ddp_hierarchical,
    diloco,
)
from onecluster.planner._plan import SCHEMA_VERSION, Plan, plan, predict
from onecluster.planner._report import CriticNumbers, Recovery, critic_numbers, recovery
from onecluster.planner._verdict import Verdict, choose, min_h

__all__ = [
    "BITS",
    "DDP_FLAT",
    "DDP_HIERARCHICAL",
    "DILOCO",
    "DILOCO_STREAMING",
    "GPUS_PER_NODE",
    "KM_PER_RTT_MS",
    "MAX_RING_SITES",
    "MODES",
    "NCCL_BASE_S",
    "NET_STEP_S",
    "PEAK_TFLOPS",
    "SCHEMA_VERSION",
    "CriticNumbers",
    "ModeResult",
    "Plan",
    "PlanInputs",
    "Recovery",
    "SitePlan",
    "Verdict",
    "WanHop",
    "WanRate",
    "all_gather_s",
    "all_modes",
    "choose",
    "critic_numbers",
    "ddp_flat",
    "ddp_hierarchical",
    "diloco",
    "fabric_notes",
    "hop_between",
    "min_h",
    "peak_tflops",
    "plan",
    "predict",
    "recovery",
    "reduce_scatter_s",
    "ring_allreduce_s",
    "ring_from_fabric",
    "wan_alpha_s",
    "wan_rate",
]
