"""Circuits between sites and the latency objectives a fabric must meet."""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.errors import ValidationError
from onecluster.model._checks import check_at_most, check_name, check_non_negative, check_positive

__all__ = ["Circuit", "LatencyObjective"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Circuit:
    """A private circuit (or bundle of ``parallel`` identical circuits) between two sites.

    ``capacity_gbps`` is per circuit; :attr:`total_gbps` is the bundle.  ``risk_group`` names
    the shared-risk group (same duct, same cable system): two circuits in one group can fail
    together, so a backup path must avoid the primary's groups.
    """

    name: str
    a: str
    b: str
    capacity_gbps: float
    rtt_ms: float
    loss: float = 0.0
    distance_km: float = 0.0
    parallel: int = 1
    risk_group: str = ""

    def __post_init__(self) -> None:
        check_name("circuit", self.name)
        if self.a == self.b:
            msg = f"circuit {self.name} joins site {self.a} to itself"
            raise ValidationError(msg)
        check_positive(f"capacity_gbps of circuit {self.name}", self.capacity_gbps)
        check_non_negative(f"rtt_ms of circuit {self.name}", self.rtt_ms)
        check_non_negative(f"distance_km of circuit {self.name}", self.distance_km)
        check_positive(f"parallel of circuit {self.name}", self.parallel)
        check_at_most(f"parallel of circuit {self.name}", self.parallel, 10_000)
        if not 0 <= self.loss < 1:
            msg = f"loss of circuit {self.name} must be a fraction in [0, 1) (got {self.loss})"
            raise ValidationError(msg)

    @property
    def total_gbps(self) -> float:
        """Capacity of the whole bundle in Gbit/s."""
        return self.capacity_gbps * self.parallel

    @property
    def bytes_per_second(self) -> float:
        """Capacity of the whole bundle in bytes per second."""
        return self.total_gbps * 1e9 / 8

    def joins(self, x: str, y: str) -> bool:
        """Whether this circuit runs between sites ``x`` and ``y`` (either direction)."""
        return {self.a, self.b} == {x, y}

    def other_end(self, site: str) -> str:
        """The site at the far end from ``site``."""
        return self.b if site == self.a else self.a


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyObjective:
    """A promise about the round-trip time between two sites (e.g. metro inference < 1 ms)."""

    a: str
    b: str
    max_rtt_ms: float
    reason: str = ""

    def __post_init__(self) -> None:
        check_positive(f"max_rtt_ms of the objective {self.a}-{self.b}", self.max_rtt_ms)
