"""The workers of one site agreeing among themselves (torch.distributed on the site's own
process group; a one-worker site needs none of it)."""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist

__all__ = ["SiteGroup"]


class SiteGroup:
    """Collectives among the workers of this site, or no-ops for a one-worker site."""

    def __init__(self, local_rank: int, local_world: int) -> None:
        self.rank = local_rank
        self.world = local_world
        if local_world > 1 and not dist.is_initialized():
            msg = (
                "a site with several workers needs torch.distributed initialised first "
                "(init_process_group with the launcher's MASTER_ADDR and MASTER_PORT)"
            )
            raise RuntimeError(msg)

    def any(self, flag: bool) -> bool:
        """Whether any worker of the site says ``flag``."""
        if self.world == 1:
            return flag
        t = torch.tensor([1 if flag else 0], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def first(self, value: int) -> int:
        """Local rank 0's ``value``, on every worker."""
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.int64)
        dist.broadcast(t, src=0)
        return int(t.item())

    def gather(self, shard: torch.Tensor, bounds: list[tuple[int, int]]) -> torch.Tensor:
        """The full vector from every worker's shard (worker *i* holds ``bounds[i]``)."""
        if self.world == 1:
            return shard
        size = max(hi - lo for lo, hi in bounds)
        padded = torch.zeros(size, dtype=shard.dtype)
        padded[: shard.numel()] = shard
        parts = [torch.zeros(size, dtype=shard.dtype) for _ in range(self.world)]
        dist.all_gather(parts, padded)
        return torch.cat([p[: hi - lo] for p, (lo, hi) in zip(parts, bounds, strict=True)])


def shard_bounds(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into ``n`` contiguous pieces as equal as can be."""
    size = hi - lo
    cuts = [lo + size * i // n for i in range(n + 1)]
    return list(itertools.pairwise(cuts))
