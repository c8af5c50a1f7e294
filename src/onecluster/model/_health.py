"""The states of circuits and sites: the words the server, the API and the dashboard use,
defined once (``docs/glossary.md``, *circuit state*; ``docs/links.md``)."""

from __future__ import annotations

from typing import Literal

__all__ = ["MAX_HEARTBEAT_S", "CircuitState", "EndView", "LinkState", "SiteStatus"]

#: What one end's probes say of a circuit (``topology.LinkTracker``): replies come (``up``),
#: they come but lossy or slow (``degraded``), or none for a while (``down``).
LinkState = Literal["up", "degraded", "down"]

#: A circuit's state: as its ends see it, or ``unknown`` with no fresh, warm view from either.
CircuitState = Literal[LinkState, "unknown"]

#: The longest interval between an agent's syncs: a third of the silence after which the
#: server gives a site no new work (``server/_views.py``, ``SILENT_S``), so that one late sync
#: never closes a site.
MAX_HEARTBEAT_S = 10.0

#: One end's view of its circuit: its tracker's state, ``warming`` during its first seconds of
#: probes (or just after a new agent took the end over), ``unknown`` while it is stale.
EndView = Literal[LinkState, "warming", "unknown"]

#: A site as its agent's syncs show it: ``unknown`` before the first sync, ``down`` once the
#: lease lapsed, ``degraded`` while its cluster manager cannot take work, else ``up``.
SiteStatus = Literal["up", "degraded", "down", "unknown"]
