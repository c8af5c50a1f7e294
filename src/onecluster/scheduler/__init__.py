"""The scheduler core: admission, placement, quotas, fair share, preemption, backfill.

Pure: the live server and the simulator both call :meth:`Scheduler.plan` with the state they
observe and apply the :class:`Plan` it returns.
"""

from onecluster.scheduler._admission import admit, largest_gang
from onecluster.scheduler._config import (
    POLICY_KINDS,
    FairShare,
    PlacementWeights,
    PolicyConfig,
    PolicyKind,
)
from onecluster.scheduler._explain import (
    Explanation,
    GuaranteeUse,
    PoolStanding,
    Reclaim,
    Reserved,
    TeamAhead,
    Verdict,
    explain,
)
from onecluster.scheduler._guarantees import guarantees
from onecluster.scheduler._ledger import AllocationLedger, PoolKey
from onecluster.scheduler._network import StagingPaths
from onecluster.scheduler._queue import PendingQueue
from onecluster.scheduler._scheduler import Scheduler
from onecluster.scheduler._state import (
    Allocation,
    ClusterView,
    PassStats,
    PendingJob,
    Plan,
    Preempt,
    Start,
)
from onecluster.scheduler._usage import UsageHistory, decayed_gpu_s

__all__ = [
    "POLICY_KINDS",
    "Allocation",
    "AllocationLedger",
    "ClusterView",
    "Explanation",
    "FairShare",
    "GuaranteeUse",
    "PassStats",
    "PendingJob",
    "PendingQueue",
    "PlacementWeights",
    "Plan",
    "PolicyConfig",
    "PolicyKind",
    "PoolKey",
    "PoolStanding",
    "Preempt",
    "Reclaim",
    "Reserved",
    "Scheduler",
    "StagingPaths",
    "Start",
    "TeamAhead",
    "UsageHistory",
    "Verdict",
    "admit",
    "decayed_gpu_s",
    "explain",
    "guarantees",
    "largest_gang",
]
