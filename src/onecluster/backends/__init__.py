"""Cluster backends: the :class:`ClusterBackend` Protocol, :class:`LocalBackend` and
:class:`SlurmBackend`.

The agent talks to a site's cluster only through :class:`ClusterBackend`; the local backend
runs attempts as real child processes on simulated GPU slots, the Slurm backend as batch jobs
of the site's Slurm cluster.  The Kubernetes backend (``batch/v1`` Jobs) lives in
:mod:`onecluster.backends.kubernetes`, imported only where used: its client is an optional
extra.
"""

from onecluster.backends._local import LocalBackend, LocalStats, kill_leftovers
from onecluster.backends._protocol import AttemptSpec, AttemptStatus, ClusterBackend, LogSlice
from onecluster.backends._slots import SlotPool, SlotUsage
from onecluster.backends._slurm import SlurmBackend
from onecluster.backends._slurm_cli import SlurmCli, SlurmUnavailable

__all__ = [
    "AttemptSpec",
    "AttemptStatus",
    "ClusterBackend",
    "LocalBackend",
    "LocalStats",
    "LogSlice",
    "SlotPool",
    "SlotUsage",
    "SlurmBackend",
    "SlurmCli",
    "SlurmUnavailable",
    "kill_leftovers",
]
