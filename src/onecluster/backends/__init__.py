"""Cluster backends: the :class:`ClusterBackend` Protocol and :class:`LocalBackend`.

The agent talks to a site's cluster only through :class:`ClusterBackend`; the local backend
runs attempts as real child processes on simulated GPU slots.
"""

from onecluster.backends._local import LocalBackend, LocalStats, kill_leftovers
from onecluster.backends._protocol import (
    AttemptSpec,
    AttemptState,
    AttemptStatus,
    ClusterBackend,
    LogChunk,
)
from onecluster.backends._slots import SlotPool, SlotUsage

__all__ = [
    "AttemptSpec",
    "AttemptState",
    "AttemptStatus",
    "ClusterBackend",
    "LocalBackend",
    "LocalStats",
    "LogChunk",
    "SlotPool",
    "SlotUsage",
    "kill_leftovers",
]
