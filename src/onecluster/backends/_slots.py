"""Simulated GPU slots: numbered GPUs per type that are lent to attempts, never over-committed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onecluster.errors import BackendError, ValidationError

__all__ = ["SlotPool", "SlotUsage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotUsage:
    """How many slots of one GPU type exist and how many are free."""

    gpu_type: str
    total: int
    free: int


class SlotPool:
    """Slot ids ``0 .. count-1`` per GPU type; each id is held by at most one owner.

    ``take`` hands out the lowest free ids (so an attempt's slots are as contiguous as the
    fragmentation allows) or raises :class:`BackendError` and takes nothing; ``give_back`` is
    idempotent per owner.
    """

    def __init__(self, pools: Mapping[str, int]) -> None:
        for gpu_type, count in pools.items():
            if not gpu_type or not isinstance(count, int) or count < 1:
                msg = f"GPU pool {gpu_type!r} needs a name and a positive count (got {count!r})"
                raise ValidationError(msg)
        if not pools:
            msg = "a backend needs at least one GPU pool, e.g. {'H100': 8}"
            raise ValidationError(msg)
        self._total = dict(pools)
        self._free: dict[str, set[int]] = {t: set(range(n)) for t, n in pools.items()}
        self._held: dict[str, tuple[str, tuple[int, ...]]] = {}

    @property
    def capacity(self) -> Mapping[str, int]:
        """Slots per GPU type, in use or not."""
        return dict(self._total)

    def usage(self) -> tuple[SlotUsage, ...]:
        """A snapshot per GPU type."""
        return tuple(
            SlotUsage(gpu_type=t, total=n, free=len(self._free[t])) for t, n in self._total.items()
        )

    def take(self, owner: str, gpu_type: str, count: int) -> tuple[int, ...]:
        """Give ``owner`` ``count`` free slots of ``gpu_type``; all or nothing."""
        if owner in self._held:
            msg = f"attempt {owner} already holds GPU slots; it cannot take more"
            raise BackendError(msg)
        free = self._free.get(gpu_type)
        if free is None:
            msg = f"this site has no {gpu_type} GPUs; it has {', '.join(sorted(self._total))}"
            raise BackendError(msg)
        if count > len(free):
            msg = (
                f"attempt {owner} needs {count} {gpu_type} GPUs but only {len(free)} of "
                f"{self._total[gpu_type]} are free"
            )
            raise BackendError(msg, hint="wait for running attempts to exit, then retry")
        ids = tuple(sorted(free)[:count])
        free.difference_update(ids)
        self._held[owner] = (gpu_type, ids)
        return ids

    def give_back(self, owner: str) -> None:
        """Free every slot ``owner`` holds (nothing if it holds none)."""
        held = self._held.pop(owner, None)
        if held is not None:
            gpu_type, ids = held
            self._free[gpu_type].update(ids)
