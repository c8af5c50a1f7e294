"""Routing between sites (pure): primary and shared-risk-disjoint backup paths over the
circuits, circuit state from probes with hysteresis and flap damping, and the planning check
of latency objectives against both routes."""

from onecluster.topology._link_state import Hysteresis, LinkEvent, LinkState, LinkTracker
from onecluster.topology._objectives import ObjectiveCheck, check_objectives
from onecluster.topology._paths import MAX_HOPS, Path, Route, paths_between, route

__all__ = [
    "MAX_HOPS",
    "Hysteresis",
    "LinkEvent",
    "LinkState",
    "LinkTracker",
    "ObjectiveCheck",
    "Path",
    "Route",
    "check_objectives",
    "paths_between",
    "route",
]
