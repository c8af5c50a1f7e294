"""The agent's side of a lease, as pure arithmetic: when to stop its attempts, and by when.

Every sync the server answers grants the site a lease: until ``lease_s`` after the server
recorded the sync (by its clock), nobody else is given the site's work.  The agent counts
the lease from the moment it *sent* that sync — earlier than the server recorded it — on a
monotonic clock, and keeps a margin for the two clocks' rates and for the time a kill takes
to land.  So the agent's end of a lease always comes before the server's, and an attempt
stopped by then cannot overlap a run that the server starts elsewhere after its end.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lease"]

#: The margin: a share of the lease, at least a second — but never more than a quarter of a
#: (very short) lease.
_MIN_MARGIN_S = 1.0
_MARGIN_SHARE = 0.05
_MAX_MARGIN_SHARE = 0.25


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A lease as the agent sees it.

    ``sent_at``: the agent's monotonic time when it sent the sync that the server answered;
    ``length_s``: the reply's ``lease_s``.
    """

    sent_at: float
    length_s: float

    @property
    def margin_s(self) -> float:
        """Kept between the agent's end of the lease and the server's (clock rates, reaping)."""
        wanted = max(_MIN_MARGIN_S, _MARGIN_SHARE * self.length_s)
        return min(wanted, _MAX_MARGIN_SHARE * self.length_s)

    @property
    def ends_at(self) -> float:
        """By this time every attempt of the site must be gone (SIGKILL at the latest)."""
        return self.sent_at + max(self.length_s - self.margin_s, 0.0)

    def grace_s(self, stop_grace_s: float) -> float:
        """The grace the attempts get when the lease runs out: the configured one, but at most
        half of the usable lease (so a short lease is not spent waiting before the stop)."""
        usable = max(self.length_s - self.margin_s, 0.0)
        return max(min(stop_grace_s, usable / 2), 0.0)

    def fence_at(self, stop_grace_s: float) -> float:
        """When to start stopping (SIGTERM) the attempts, so they are gone by :attr:`ends_at`."""
        return self.ends_at - self.grace_s(stop_grace_s)
