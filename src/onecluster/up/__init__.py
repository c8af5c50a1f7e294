"""``onecluster up``: the fabric as real local processes, a replayed workload, a live view."""

from onecluster.up._config import MAX_REPLICAS, UpConfig
from onecluster.up._run import run_up

__all__ = ["MAX_REPLICAS", "UpConfig", "run_up"]
