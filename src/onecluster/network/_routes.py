"""Programming the kernel's routes to other sites from the server's route table.

The agent of a site owns one host route per peer site's service address: via the peer's
address on the circuit the route table names, with the site's own service address as the
source (so replies come back to it, whichever way they are routed).  A peer with no path at
all gets an ``unreachable`` route, so senders fail fast instead of blackholing into a cut
circuit.  All routes of one table go to the kernel in one ``ip -batch`` call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from onecluster.network._ip import run

__all__ = ["KernelRoute", "KernelRoutes", "RouteSink"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelRoute:
    """A host route to ``dst`` via ``via`` (``None``: unreachable), sourced from ``src``."""

    dst: str
    via: str | None
    src: str | None = None


class RouteSink(Protocol):
    """Where an agent's routes go (the kernel, or a test's list)."""

    def apply(self, routes: Sequence[KernelRoute]) -> None:
        """Make ``routes`` the routes to the peer sites; raise ``PlatformError`` on failure."""
        ...


class KernelRoutes:
    """A :class:`RouteSink` on this process's network namespace (the agent's site)."""

    def __init__(self, netns: str | None = None) -> None:
        self._netns = netns

    def apply(self, routes: Sequence[KernelRoute]) -> None:
        """``ip route replace`` every route in one batch (idempotent)."""
        if not routes:
            return
        lines = []
        for r in routes:
            if r.via is None:
                lines.append(f"route replace unreachable {r.dst}/32")
            else:
                src = f" src {r.src}" if r.src else ""
                lines.append(f"route replace {r.dst}/32 via {r.via}{src}")
        # -force: one route that cannot be set (its next hop's device is gone) must not keep
        # the others from being set; the failure is still reported.
        argv = ["ip", *(["-n", self._netns] if self._netns else []), "-force", "-batch", "-"]
        run(argv, what="program the routes to the other sites", stdin="\n".join(lines) + "\n")
