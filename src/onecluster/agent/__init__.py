"""The site agent: keeps a site's attempts in line with what the control plane desires.

:func:`run_agent` is what ``onecluster agent`` calls; :class:`Agent` is the loop itself (see
its module for the sync rules, backoff and shutdown behaviour: running jobs are stopped with
a grace period and reported as ``lost`` when the agent stops).
"""

from onecluster.agent._agent import Agent, AgentStats
from onecluster.agent._config import AgentConfig
from onecluster.agent._reconcile import Actions, Rejected, StopOrder, reconcile
from onecluster.agent._run import run_agent
from onecluster.agent._server_link import ServerLink, SyncLink

__all__ = [
    "Actions",
    "Agent",
    "AgentConfig",
    "AgentStats",
    "Rejected",
    "ServerLink",
    "StopOrder",
    "SyncLink",
    "reconcile",
    "run_agent",
]
