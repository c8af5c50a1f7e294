"""The discrete-event simulator: replays a workload on a fabric through the live scheduler."""

from onecluster.simulate._engine import simulate
from onecluster.simulate._result import SimResult, SiteStats, TeamStats

__all__ = ["SimResult", "SiteStats", "TeamStats", "simulate"]
