"""Programming the kernel's routes to other sites from the server's route table.

The agent of a site owns one host route per peer site's service address: via the peer's
address on the circuit the route table names, with the site's own service address as the
source (so replies come back to it, whichever way they are routed).  A peer with no path at
all gets an ``unreachable`` route, so senders fail fast instead of blackholing into a cut
circuit.  All routes of one table go to the kernel in one ``ip -batch`` call.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from onecluster.errors import ValidationError
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
        self._owned: set[str] = set()

    def apply(self, routes: Sequence[KernelRoute]) -> None:
        """``ip route replace`` every route in one batch (idempotent); routes this sink set
        before to destinations no longer listed are deleted.  :class:`ValidationError` for
        anything that is not an IPv4 address (nothing reaches the kernel then)."""
        for r in routes:
            for value in (r.dst, r.via, r.src):
                if value is not None:
                    _check_ipv4(value)
        wanted = {r.dst for r in routes}
        lines = [f"route del {dst}/32" for dst in sorted(self._owned - wanted)]
        for r in routes:
            if r.via is None:
                lines.append(f"route replace unreachable {r.dst}/32")
            else:
                src = f" src {r.src}" if r.src else ""
                lines.append(f"route replace {r.dst}/32 via {r.via}{src}")
        # -force: one route that cannot be set (its next hop's device is gone) must not keep
        # the others from being set; the failure is still reported.
        if not lines:
            return
        argv = ["ip", *(["-n", self._netns] if self._netns else []), "-force", "-batch", "-"]
        try:
            run(argv, what="program the routes to the other sites", stdin="\n".join(lines) + "\n")
        except BaseException:
            self._owned |= wanted  # deletions that may have failed are tried again next time
            raise
        self._owned = wanted


def _check_ipv4(value: str) -> None:
    try:
        ipaddress.IPv4Address(value)
    except ValueError as exc:
        msg = f"route address {value!r} is not an IPv4 address"
        raise ValidationError(msg) from exc
