"""Fabric files: the YAML an admin writes to declare sites, circuits, teams and datasets;
what changes from one fabric to the next, and what a change would strand."""

from onecluster.fabric._diff import Change, ChangeKind, FabricDiff, FieldChange, fabric_diff
from onecluster.fabric._dump import dump_fabric
from onecluster.fabric._loader import load_fabric, parse_fabric
from onecluster.fabric._strands import (
    ActiveAttempt,
    ActiveTransfer,
    PendingWork,
    Strand,
    Workload,
    refusal,
    stranded,
)

__all__ = [
    "ActiveAttempt",
    "ActiveTransfer",
    "Change",
    "ChangeKind",
    "FabricDiff",
    "FieldChange",
    "PendingWork",
    "Strand",
    "Workload",
    "dump_fabric",
    "fabric_diff",
    "load_fabric",
    "parse_fabric",
    "refusal",
    "stranded",
]
