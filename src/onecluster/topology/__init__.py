"""Routing between sites (pure): primary and shared-risk-disjoint backup paths over the
circuits, the route table every site follows, circuit state from probes with hysteresis and
flap damping, and the planning check of latency objectives against both routes."""

from onecluster.topology._link_state import Hysteresis, LinkEvent, LinkState, LinkTracker
from onecluster.topology._objectives import (
    ObjectiveCheck,
    PairCheck,
    check_objectives,
    check_pairs,
)
from onecluster.topology._paths import MAX_HOPS, Path, Route, paths_between, route
from onecluster.topology._table import NextHop, RouteTable, route_table

__all__ = [
    "MAX_HOPS",
    "Hysteresis",
    "LinkEvent",
    "LinkState",
    "LinkTracker",
    "NextHop",
    "ObjectiveCheck",
    "PairCheck",
    "Path",
    "Route",
    "RouteTable",
    "check_objectives",
    "check_pairs",
    "paths_between",
    "route",
    "route_table",
]
