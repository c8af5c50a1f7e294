"""Domain types: immutable, self-validating, no I/O."""

from onecluster.model._attempt import (
    ACTIVE_ATTEMPT_STATES,
    OBSERVED_ATTEMPT_STATES,
    AttemptRecord,
    AttemptState,
)
from onecluster.model._checks import (
    MAX_DATASET_BYTES,
    MAX_GPUS,
    MAX_LABEL,
    label_problem,
    name_problem,
)
from onecluster.model._circuit import Circuit, LatencyObjective
from onecluster.model._dataset import Dataset
from onecluster.model._fabric import Fabric
from onecluster.model._gang import gang_port
from onecluster.model._health import MAX_HEARTBEAT_S, CircuitState, EndView, LinkState, SiteStatus
from onecluster.model._job import (
    TERMINAL_STATES,
    JobRecord,
    JobSpec,
    JobState,
    PriorityClass,
    SitePart,
    kept_after,
)
from onecluster.model._site import BACKENDS, GpuPool, Site
from onecluster.model._team import Team

__all__ = [
    "ACTIVE_ATTEMPT_STATES",
    "BACKENDS",
    "MAX_DATASET_BYTES",
    "MAX_GPUS",
    "MAX_HEARTBEAT_S",
    "MAX_LABEL",
    "OBSERVED_ATTEMPT_STATES",
    "TERMINAL_STATES",
    "AttemptRecord",
    "AttemptState",
    "Circuit",
    "CircuitState",
    "Dataset",
    "EndView",
    "Fabric",
    "GpuPool",
    "JobRecord",
    "JobSpec",
    "JobState",
    "LatencyObjective",
    "LinkState",
    "PriorityClass",
    "Site",
    "SitePart",
    "SiteStatus",
    "Team",
    "gang_port",
    "kept_after",
    "label_problem",
    "name_problem",
]
