"""Teams, their quotas and their share of the cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from onecluster.errors import ValidationError
from onecluster.model._checks import (
    MAX_GPUS,
    check_at_most,
    check_name,
    check_non_negative,
    check_positive,
)

__all__ = ["Team"]

#: Fair-share weights are relative; a million to one is already "never".
_MAX_WEIGHT = 1_000_000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Team:
    """A team that submits jobs.

    ``quota`` maps GPU type → GPUs the team is entitled to across *all* sites (quota is
    global, not per site).  Work beyond quota may still run on idle GPUs, *borrowed* and
    pre-emptible.  ``quota=None`` means the team declares none: it gets a derived guarantee,
    its home site's GPUs shared by weight with the other teams homed there that declare none
    (:func:`onecluster.scheduler.guarantees`).  ``weight`` sets its share in fair sharing.
    """

    name: str
    home_site: str
    weight: float = 1.0
    quota: Mapping[str, int] | None = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name("team", self.name)
        check_positive(f"weight of team {self.name}", self.weight)
        check_at_most(f"weight of team {self.name}", self.weight, _MAX_WEIGHT)
        if self.quota is not None:
            for gpu_type, n in self.quota.items():
                check_non_negative(f"quota of team {self.name} for {gpu_type}", n)
                check_at_most(f"quota of team {self.name} for {gpu_type}", n, MAX_GPUS)
                if int(n) != n:
                    msg = f"quota of team {self.name} for {gpu_type} must be a whole number"
                    raise ValidationError(msg)
            object.__setattr__(self, "quota", MappingProxyType(dict(self.quota)))

    def quota_for(self, gpu_type: str) -> int | None:
        """GPUs of ``gpu_type`` within quota; ``None`` means unlimited."""
        if self.quota is None:
            return None
        return self.quota.get(gpu_type, 0)
