"""The pending queue, indexed so a pass touches the heads of job *shapes*, not every job.

Jobs are grouped into buckets by (priority, team, shape); a shape is everything that decides
*whether* a job fits (GPU count, acceptable types, sites allowed, pre-emptible flag, and the
dataset, since a site its data cannot reach is no place for it).  Within a
pass, free capacity only shrinks, so once the head of a bucket cannot be placed, nothing
behind it can either — the pass skips the whole bucket.  That keeps a pass over 100,000
pending jobs proportional to what it starts, not to the queue's length.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from onecluster.errors import ConflictError
from onecluster.scheduler._state import PendingJob

__all__ = ["Bucket", "BucketKey", "Entry", "PendingQueue", "Shape"]


@dataclass(frozen=True, slots=True)
class Shape:
    """What decides whether a job fits, independent of which job it is."""

    gpus: int
    gpu_types: tuple[str, ...]
    max_sites: int
    pinned_site: str | None
    preemptible: bool
    dataset: str | None  # where its data can be staged decides where it can run


BucketKey = tuple[int, str, Shape]
#: (submitted_at, insertion seq, job id, estimated run time).  Sorted by the first two; the run
#: time rides along so a backfill look-ahead can skip long jobs without looking them up.
Entry = tuple[float, int, str, float]


class Bucket:
    """Jobs of one (priority, team, shape), oldest first; removed entries are skipped lazily."""

    __slots__ = ("entries", "key", "live", "start")

    def __init__(self, key: BucketKey) -> None:
        self.key = key
        self.entries: list[Entry] = []
        self.live = 0
        self.start = 0  # entries before this index are all removed jobs

    @property
    def priority(self) -> int:
        """The bucket's priority class value."""
        return self.key[0]

    @property
    def team(self) -> str:
        """The bucket's team."""
        return self.key[1]

    @property
    def shape(self) -> Shape:
        """The bucket's shape."""
        return self.key[2]


class PendingQueue:
    """Jobs waiting for GPUs, in submit order within each bucket.

    The caller owns the queue: it adds submitted (and requeued) jobs and removes started or
    cancelled ones.  :meth:`Scheduler.plan` only reads it.
    """

    def __init__(self) -> None:
        self._jobs: dict[str, tuple[int, PendingJob]] = {}
        self._buckets: dict[BucketKey, Bucket] = {}
        self._seq = 0

    @classmethod
    def of(cls, jobs: Iterable[PendingJob]) -> PendingQueue:
        """A queue holding ``jobs``."""
        q = cls()
        for j in jobs:
            q.add(j)
        return q

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __iter__(self) -> Iterator[PendingJob]:
        return (j for _, j in self._jobs.values())

    def get(self, job_id: str) -> PendingJob | None:
        """The pending job ``job_id``, or ``None``."""
        entry = self._jobs.get(job_id)
        return entry[1] if entry else None

    def add(self, job: PendingJob) -> None:
        """Queue ``job``; a job id may be queued once."""
        if job.job_id in self._jobs:
            msg = f"job {job.job_id} is already queued"
            raise ConflictError(msg)
        self._seq += 1
        self._jobs[job.job_id] = (self._seq, job)
        key = _bucket_key(job)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(key)
        entry = (job.submitted_at, self._seq, job.job_id, job.spec.duration_s)
        if not bucket.entries or bucket.entries[-1] < entry:
            bucket.entries.append(entry)
        else:
            # A requeued job keeps its submit time, so it goes back to its place in line.
            bisect.insort(bucket.entries, entry, lo=bucket.start)
        bucket.live += 1

    def remove(self, job_id: str) -> PendingJob:
        """Take ``job_id`` out of the queue (started or cancelled)."""
        _, job = self._jobs.pop(job_id)
        key = _bucket_key(job)
        bucket = self._buckets[key]
        bucket.live -= 1
        if bucket.live == 0:
            del self._buckets[key]
            return job
        entries = bucket.entries
        while bucket.start < len(entries) and not self.is_live(entries[bucket.start]):
            bucket.start += 1
        if bucket.start > 256 and bucket.start * 2 > len(entries):
            del entries[: bucket.start]
            bucket.start = 0
        if len(entries) - bucket.start > 2 * bucket.live + 64:
            # Many removals from the middle (cancels, out-of-order starts): compact.
            bucket.entries = [e for e in entries[bucket.start :] if self.is_live(e)]
            bucket.start = 0
        return job

    def is_live(self, entry: Entry) -> bool:
        """Whether a bucket entry still stands for a queued job."""
        found = self._jobs.get(entry[2])
        return found is not None and found[0] == entry[1]

    def job(self, entry: Entry) -> PendingJob:
        """The job a live entry stands for."""
        return self._jobs[entry[2]][1]

    def buckets(self) -> Iterable[Bucket]:
        """Every non-empty bucket."""
        return self._buckets.values()


def _bucket_key(job: PendingJob) -> BucketKey:
    s = job.spec
    dataset = s.dataset if s.dataset_bytes > 0 else None
    shape = Shape(s.gpus, s.gpu_types, s.max_sites, job.pinned_site, s.preemptible, dataset)
    return (int(s.priority), s.team, shape)
