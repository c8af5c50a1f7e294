"""Routing between sites (pure): primary and shared-risk-disjoint backup paths over the
circuits, the route table every site follows, circuit state from both ends' probes with
hysteresis and flap damping, the agents' clock offsets, the alerts' outbox, and the planning
check of latency objectives against both routes."""

from onecluster.topology._alerts import AlertKind, LinkAlert, Outbox, route_alerts
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
from onecluster.topology._states import EndReport, LinkStates
from onecluster.topology._table import NextHop, RouteTable, route_table

__all__ = [
    "MAX_HOPS",
    "AlertKind",
    "ClockOffsets",
    "EndReport",
    "Hysteresis",
    "LinkAlert",
    "LinkEnds",
    "LinkEvent",
    "LinkStates",
    "LinkTracker",
    "NextHop",
    "ObjectiveCheck",
    "Outbox",
    "PairCheck",
    "Path",
    "Probe",
    "Route",
    "RouteTable",
    "check_objectives",
    "check_pairs",
    "paths_between",
    "route",
    "route_alerts",
    "route_table",
]
