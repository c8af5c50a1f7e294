"""Routing between sites (pure): primary and shared-risk-disjoint backup paths over the
circuits, and the planning check of latency objectives against both."""

from onecluster.topology._objectives import ObjectiveCheck, check_objectives
from onecluster.topology._paths import MAX_HOPS, Path, Route, paths_between, route

__all__ = [
    "MAX_HOPS",
    "ObjectiveCheck",
    "Path",
    "Route",
    "check_objectives",
    "paths_between",
    "route",
]
