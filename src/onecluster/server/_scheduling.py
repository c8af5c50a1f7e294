"""The scheduler's view of the cluster, read from the store the way every reconcile pass
reads it (and ``GET /jobs/{id}/why``, which must see what the pass sees)."""

from __future__ import annotations

from onecluster.scheduler import ClusterView
from onecluster.server._control import ControlPlane
from onecluster.server._views import cluster_view

__all__ = ["scheduler_view"]


def scheduler_view(control: ControlPlane, now: float) -> ClusterView:
    """What a pass at ``now`` decides on: running allocations, sites, circuit load, dataset
    replicas and the teams' decayed usage."""
    return cluster_view(
        control.fabric,
        control.store.running_jobs(),
        control.store.sites(),
        now=now,
        circuit_load=control.circuit_load(now),
        registered=control.data.replicas(),
        usage=control.usage.at(now),
    )
