"""``onecluster lab``: a multi-site fabric emulated on one Linux host (root): one network
namespace per site with its agent, circuits with the fabric's delay, loss and (scaled) rate,
and commands to cut, heal and flap circuits and to lose and restore whole sites."""

from onecluster.lab._circuits import EmulatorStatus, LinkEmulator, TunEmulator
from onecluster.lab._lab import (
    DEFAULT_ROOT,
    CircuitStatus,
    FlowSample,
    Lab,
    LabStatus,
    SiteStatus,
)
from onecluster.lab._plan import BRIDGE_IP, CircuitPlan, LabPlan, SitePlan, plan_lab
from onecluster.lab._state import LabState

__all__ = [
    "BRIDGE_IP",
    "DEFAULT_ROOT",
    "CircuitPlan",
    "CircuitStatus",
    "EmulatorStatus",
    "FlowSample",
    "Lab",
    "LabPlan",
    "LabState",
    "LabStatus",
    "LinkEmulator",
    "SitePlan",
    "SiteStatus",
    "TunEmulator",
    "plan_lab",
]
