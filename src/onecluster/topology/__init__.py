"""Routing between sites (pure): primary and shared-risk-disjoint backup paths over the
circuits, the route table every site follows, circuit state from both ends' probes with
hysteresis and flap damping, the agents' clock offsets, the alerts' outbox, the planning
check of latency objectives against both routes, and a site's own fast reroute around circuits
its probes find silent."""

from onecluster.topology._alerts import AlertKind, LinkAlert, Outbox, route_alerts
from onecluster.topology._carry import CircuitCarry, EndCarry, LinkCarry
from onecluster.topology._ends import LinkEnds, Probe
from onecluster.topology._link_state import Hysteresis, LinkEvent, LinkTracker
from onecluster.topology._objectives import (
    ObjectiveCheck,
    PairCheck,
    check_objectives,
    check_pairs,
)
from onecluster.topology._offsets import ClockOffsets
from onecluster.topology._paths import MAX_HOPS, Path, Route, paths_between, route
from onecluster.topology._reroute import LocalHop, TableRoute, local_hops
from onecluster.topology._silence import SilenceWatch, SilenceWatchStats
from onecluster.topology._states import EndReport, LinkStates
from onecluster.topology._table import NextHop, RouteTable, route_table

__all__ = [
    "MAX_HOPS",
    "AlertKind",
    "CircuitCarry",
    "ClockOffsets",
    "EndCarry",
    "EndReport",
    "Hysteresis",
    "LinkAlert",
    "LinkCarry",
    "LinkEnds",
    "LinkEvent",
    "LinkStates",
    "LinkTracker",
    "LocalHop",
    "NextHop",
    "ObjectiveCheck",
    "Outbox",
    "PairCheck",
    "Path",
    "Probe",
    "Route",
    "RouteTable",
    "SilenceWatch",
    "SilenceWatchStats",
    "TableRoute",
    "check_objectives",
    "check_pairs",
    "local_hops",
    "paths_between",
    "route",
    "route_alerts",
    "route_table",
]
