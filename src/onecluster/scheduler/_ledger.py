"""Who holds which GPUs: allocations indexed by pool and team, updated incrementally."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator

from onecluster.errors import ConflictError
from onecluster.scheduler._state import Allocation

__all__ = ["AllocationLedger", "PoolKey"]

#: A pool is one GPU type at one site.
PoolKey = tuple[str, str]


class AllocationLedger:
    """Every running allocation, with the sums a scheduling pass needs kept up to date.

    The live server builds one per pass from the database; the simulator keeps one for the
    whole run and updates it as jobs start, drain and end, so a pass never walks every
    running job.  The ledger trusts its caller on capacity (the scheduler never over-commits;
    the property tests check that).
    """

    def __init__(self) -> None:
        self._by_job: dict[str, Allocation] = {}
        self._by_pool: dict[PoolKey, dict[str, Allocation]] = defaultdict(dict)
        self.used: dict[PoolKey, int] = defaultdict(int)
        self.draining: dict[PoolKey, int] = defaultdict(int)
        self.victim_gpus: dict[PoolKey, int] = defaultdict(int)
        self.nominal: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.borrowed: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.team_gpus: dict[str, int] = defaultdict(int)
        self._ends: dict[PoolKey, list[tuple[float, str, int]]] = defaultdict(list)

    @classmethod
    def of(cls, allocations: Iterable[Allocation]) -> AllocationLedger:
        """A ledger holding ``allocations``."""
        ledger = cls()
        for a in allocations:
            ledger.add(a)
        return ledger

    def __len__(self) -> int:
        return len(self._by_job)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._by_job

    def __iter__(self) -> Iterator[Allocation]:
        return iter(self._by_job.values())

    def get(self, job_id: str) -> Allocation | None:
        """The allocation of ``job_id``, or ``None``."""
        return self._by_job.get(job_id)

    def in_pool(self, pool: PoolKey) -> Iterable[Allocation]:
        """Allocations with a part in ``pool``."""
        return self._by_pool.get(pool, {}).values()

    def ends_in_pool(self, pool: PoolKey) -> list[tuple[float, str, int]]:
        """(expected end, job id, GPUs in ``pool``) of its allocations, soonest first.

        Kept sorted as allocations come and go, so a backfill reservation reads only as many
        as it needs.  Read-only for callers.
        """
        return self._ends.get(pool, [])

    def add(self, a: Allocation) -> None:
        """Record a new allocation; a job can hold only one."""
        if a.job_id in self._by_job:
            msg = f"job {a.job_id} already holds GPUs"
            raise ConflictError(msg)
        self._by_job[a.job_id] = a
        self._account(a, +1)

    def remove(self, job_id: str) -> Allocation:
        """Release the GPUs of ``job_id`` and return its allocation."""
        a = self._by_job.pop(job_id)
        self._account(a, -1)
        return a

    def replace(self, a: Allocation) -> None:
        """Swap the allocation of ``a.job_id`` (e.g. to mark it draining)."""
        self.remove(a.job_id)
        self.add(a)

    def _account(self, a: Allocation, sign: int) -> None:
        team_usage = self.borrowed[a.team] if a.borrowed else self.nominal[a.team]
        for p in a.parts:
            key = (p.site, p.gpu_type)
            self.used[key] += sign * p.gpus
            team_usage[p.gpu_type] += sign * p.gpus
            if a.draining:
                self.draining[key] += sign * p.gpus
            if a.victim_class:
                self.victim_gpus[key] += sign * p.gpus
            end = (a.expected_end, a.job_id, p.gpus)
            ends = self._ends[key]
            if sign > 0:
                self._by_pool[key][a.job_id] = a
                bisect.insort(ends, end)
            else:
                del self._by_pool[key][a.job_id]
                del ends[bisect.bisect_left(ends, end)]
        self.team_gpus[a.team] += sign * a.gpus
