"""Sites and their GPU pools."""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.errors import ValidationError
from onecluster.model._checks import (
    MAX_COST_PER_GPU_HOUR,
    MAX_GPUS,
    MAX_NAME,
    check_at_most,
    check_label,
    check_name,
    check_non_negative,
    check_positive,
)

__all__ = ["BACKENDS", "GpuPool", "Site"]

#: The cluster backends a site may name in the fabric file.
BACKENDS = ("local", "slurm", "kubernetes")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPool:
    """All GPUs of one type at one site, with their price per GPU-hour."""

    gpu_type: str
    count: int
    cost_per_gpu_hour: float = 0.0

    def __post_init__(self) -> None:
        if not self.gpu_type or not isinstance(self.gpu_type, str):
            msg = "a GPU pool needs a gpu_type such as 'H100' or 'A100-80G'"
            raise ValidationError(msg)
        check_label("GPU type", self.gpu_type, MAX_NAME)
        if not isinstance(self.count, int):
            msg = f"the GPU count of pool {self.gpu_type} must be a whole number"
            raise ValidationError(msg)
        check_positive(f"the GPU count of pool {self.gpu_type}", self.count)
        check_at_most(f"the GPU count of pool {self.gpu_type}", self.count, MAX_GPUS)
        cost = f"the cost per GPU-hour of pool {self.gpu_type}"
        check_non_negative(cost, self.cost_per_gpu_hour)
        check_at_most(cost, self.cost_per_gpu_hour, MAX_COST_PER_GPU_HOUR)


@dataclass(frozen=True, slots=True, kw_only=True)
class Site:
    """A data centre: where jobs run, inside one jurisdiction, under one cluster backend."""

    name: str
    region: str
    jurisdiction: str
    pools: tuple[GpuPool, ...]
    backend: str = "local"
    controls_export: bool = False

    def __post_init__(self) -> None:
        check_name("site", self.name)
        check_label(f"region of site {self.name}", self.region)
        check_label(f"jurisdiction of site {self.name}", self.jurisdiction)
        if not self.pools:
            msg = f"site {self.name} has no GPU pools; give it at least one"
            raise ValidationError(msg)
        types = [p.gpu_type for p in self.pools]
        if len(set(types)) != len(types):
            msg = f"site {self.name} lists a GPU type twice; merge its pools"
            raise ValidationError(msg)
        if self.backend not in BACKENDS:
            msg = f"site {self.name} has backend {self.backend!r}; use one of {', '.join(BACKENDS)}"
            raise ValidationError(msg)

    @property
    def total_gpus(self) -> int:
        """GPUs of every type at this site."""
        return sum(p.count for p in self.pools)

    def pool(self, gpu_type: str) -> GpuPool | None:
        """The pool of ``gpu_type`` here, or ``None``."""
        for p in self.pools:
            if p.gpu_type == gpu_type:
                return p
        return None
