"""The discrete-event simulator: replays a workload on a fabric through the live scheduler."""

from onecluster.simulate._compare import MIN_JOBS, TeamComparison, compare_teams
from onecluster.simulate._engine import simulate
from onecluster.simulate._result import SimResult, SiteStats, TeamStats

__all__ = [
    "MIN_JOBS",
    "SimResult",
    "SiteStats",
    "TeamComparison",
    "TeamStats",
    "compare_teams",
    "simulate",
]
